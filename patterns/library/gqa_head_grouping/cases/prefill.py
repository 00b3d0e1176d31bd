# refuse: already calls tl.dot \(line 22\)
# a query block of BM tokens per (block, head): the scores are already a tl.dot
import torch
import triton
import triton.language as tl


@triton.jit
def gqa_prefill_kernel(q, k, v, o, scale, T, HQ: tl.constexpr, HK: tl.constexpr, D: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr):
    i_m, i_hq = tl.program_id(0), tl.program_id(1)
    i_hk = i_hq // (HQ // HK)
    o_m = i_m * BM + tl.arange(0, BM)
    o_d = tl.arange(0, D)
    b_q = tl.load(q + (o_m[:, None] * HQ + i_hq) * D + o_d[None, :], mask=(o_m < T)[:, None], other=0)
    b_m = tl.full([BM], float("-inf"), dtype=tl.float32)
    b_l = tl.zeros([BM], dtype=tl.float32)
    b_acc = tl.zeros([BM, D], dtype=tl.float32)
    for i_n in range(0, T, BN):
        o_n = i_n + tl.arange(0, BN)
        b_k = tl.load(k + (o_n[:, None] * HK + i_hk) * D + o_d[None, :], mask=(o_n < T)[:, None], other=0)
        b_v = tl.load(v + (o_n[:, None] * HK + i_hk) * D + o_d[None, :], mask=(o_n < T)[:, None], other=0)
        b_s = tl.where((o_n < T)[None, :], tl.dot(b_q, tl.trans(b_k)) * scale, float("-inf"))
        b_m_new = tl.maximum(b_m, tl.max(b_s, 1))
        b_p = tl.exp(b_s - b_m_new[:, None])
        b_alpha = tl.exp(b_m - b_m_new)
        b_acc = b_acc * b_alpha[:, None] + tl.dot(b_p.to(b_v.dtype), b_v)
        b_l = b_l * b_alpha + tl.sum(b_p, 1)
        b_m = b_m_new
    tl.store(o + (o_m[:, None] * HQ + i_hq) * D + o_d[None, :], b_acc / b_l[:, None], mask=(o_m < T)[:, None])


def gqa_prefill(q, k, v):
    T, HQ, D = q.shape
    o = torch.empty_like(q)
    gqa_prefill_kernel[(triton.cdiv(T, 64), HQ)](q, k, v, o, D**-0.5, T, HQ=HQ, HK=k.shape[1], D=D, BM=64, BN=64)
    return o
