# refuse: b_acc is a 2-D tile per query head \(line 16\)
# the products are accumulated as a [BT, D] tile and reduced once after the loop
import torch
import triton
import triton.language as tl


@triton.jit
def deferred_decode_kernel(q, k, v, o, scale, T, HQ: tl.constexpr, HK: tl.constexpr, D: tl.constexpr, BT: tl.constexpr):
    i_b, i_hq = tl.program_id(0).to(tl.int64), tl.program_id(1).to(tl.int64)
    i_hk = i_hq // (HQ // HK)
    o_d = tl.arange(0, D)
    b_q = tl.load(q + (i_b * HQ + i_hq) * D + o_d).to(tl.float32) * scale
    b_m = float("-inf")
    b_l = tl.zeros([BT], dtype=tl.float32)
    b_acc = tl.zeros([BT, D], dtype=tl.float32)
    for i_t in range(0, T, BT):
        o_t = i_t + tl.arange(0, BT)
        p_kv = ((i_b * T + o_t[:, None]) * HK + i_hk) * D + o_d[None, :]
        b_k = tl.load(k + p_kv, mask=(o_t < T)[:, None], other=0).to(tl.float32)
        b_v = tl.load(v + p_kv, mask=(o_t < T)[:, None], other=0).to(tl.float32)
        b_s = tl.where(o_t < T, tl.sum(b_k * b_q[None, :], 1), float("-inf"))
        b_m_new = tl.maximum(b_m, tl.max(b_s, 0))
        b_p = tl.exp(b_s - b_m_new)
        b_alpha = tl.exp(b_m - b_m_new)
        b_acc = b_acc * b_alpha + b_p[:, None] * b_v
        b_l = b_l * b_alpha + b_p
        b_m = b_m_new
    tl.store(o + (i_b * HQ + i_hq) * D + o_d, tl.sum(b_acc, 0) / tl.sum(b_l, 0))


def deferred_decode(q, k, v):
    B, HQ, D = q.shape
    o = torch.empty_like(q)
    deferred_decode_kernel[(B, HQ)](q, k, v, o, D**-0.5, k.shape[1], HQ=HQ, HK=k.shape[2], D=D, BT=64)
    return o
