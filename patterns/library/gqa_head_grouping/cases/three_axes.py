# refuse: uses 3 program_id axes
# (batch, query head, KV split) programs: no axis left to reuse
import torch
import triton
import triton.language as tl


@triton.jit
def split_decode_kernel(q, k, v, o_part, lse_part, scale, T, HQ: tl.constexpr, HK: tl.constexpr, D: tl.constexpr, BT: tl.constexpr,
                        NUM_SPLITS: tl.constexpr):
    i_b, i_hq, i_s = tl.program_id(0).to(tl.int64), tl.program_id(1).to(tl.int64), tl.program_id(2).to(tl.int64)
    i_hk = i_hq // (HQ // HK)
    o_d = tl.arange(0, D)
    b_q = tl.load(q + (i_b * HQ + i_hq) * D + o_d).to(tl.float32) * scale
    b_m = float("-inf")
    b_l = 0.0
    b_acc = tl.zeros([D], dtype=tl.float32)
    for i_t in range(i_s * BT, T, NUM_SPLITS * BT):
        o_t = i_t + tl.arange(0, BT)
        p_kv = ((i_b * T + o_t[:, None]) * HK + i_hk) * D + o_d[None, :]
        b_k = tl.load(k + p_kv, mask=(o_t < T)[:, None], other=0).to(tl.float32)
        b_v = tl.load(v + p_kv, mask=(o_t < T)[:, None], other=0).to(tl.float32)
        b_s = tl.where(o_t < T, tl.sum(b_k * b_q[None, :], 1), float("-inf"))
        b_m_new = tl.maximum(b_m, tl.max(b_s, 0))
        b_p = tl.exp(b_s - b_m_new)
        b_alpha = tl.exp(b_m - b_m_new)
        b_acc = b_acc * b_alpha + tl.sum(b_p[:, None] * b_v, 0)
        b_l = b_l * b_alpha + tl.sum(b_p, 0)
        b_m = b_m_new
    i_row = (i_b * HQ + i_hq) * NUM_SPLITS + i_s
    tl.store(o_part + i_row * D + o_d, b_acc / b_l)
    tl.store(lse_part + i_row, b_m + tl.log(b_l))


def split_decode(q, k, v, num_splits=4):
    B, HQ, D = q.shape
    o_part = torch.empty(B, HQ, num_splits, D, dtype=torch.float32, device=q.device)
    lse_part = torch.empty(B, HQ, num_splits, dtype=torch.float32, device=q.device)
    split_decode_kernel[(B, HQ, num_splits)](q, k, v, o_part, lse_part, D**-0.5, k.shape[1], HQ=HQ, HK=k.shape[2], D=D, BT=64,
                                             NUM_SPLITS=num_splits)
    return o_part, lse_part
