# refuse: no query-head to KV-head mapping
import torch
import triton
import triton.language as tl


@triton.jit
def mha_decode_kernel(q, k, v, o, scale, T, H: tl.constexpr, HK: tl.constexpr, D: tl.constexpr, BT: tl.constexpr):
    i_b, i_h = tl.program_id(0).to(tl.int64), tl.program_id(1).to(tl.int64)
    o_d = tl.arange(0, D)
    b_q = tl.load(q + (i_b * H + i_h) * D + o_d).to(tl.float32) * scale
    b_m = float("-inf")
    b_l = 0.0
    b_acc = tl.zeros([D], dtype=tl.float32)
    for i_t in range(0, T, BT):
        o_t = i_t + tl.arange(0, BT)
        # one KV head per query head
        p_kv = ((i_b * T + o_t[:, None]) * H + i_h) * D + o_d[None, :]
        b_k = tl.load(k + p_kv, mask=(o_t < T)[:, None], other=0).to(tl.float32)
        b_v = tl.load(v + p_kv, mask=(o_t < T)[:, None], other=0).to(tl.float32)
        b_s = tl.where(o_t < T, tl.sum(b_k * b_q[None, :], 1), float("-inf"))
        b_m_new = tl.maximum(b_m, tl.max(b_s, 0))
        b_p = tl.exp(b_s - b_m_new)
        b_alpha = tl.exp(b_m - b_m_new)
        b_acc = b_acc * b_alpha + tl.sum(b_p[:, None] * b_v, 0)
        b_l = b_l * b_alpha + tl.sum(b_p, 0)
        b_m = b_m_new
    tl.store(o + (i_b * H + i_h) * D + o_d, b_acc / b_l)


def mha_decode(q, k, v):
    B, H, D = q.shape
    o = torch.empty_like(q)
    mha_decode_kernel[(B, H)](q, k, v, o, D**-0.5, k.shape[1], H=H, HK=k.shape[2], D=D, BT=64)
    return o
