"""Causal attention forward, o = softmax(mask(q·kᵀ·scale))·v per (batch·head), fp32.

One program per [BM] query tile runs an online softmax over the key tiles and
masks the keys after each query with -inf.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def causal_attn_fwd_kernel(q, k, v, o, scale, T, D, BM: tl.constexpr, BN: tl.constexpr, BD: tl.constexpr):
    i_m, i_bh = tl.program_id(0), tl.program_id(1).to(tl.int64)
    o_m = i_m * BM + tl.arange(0, BM)
    o_d = tl.arange(0, BD)
    m_m, m_d = o_m < T, o_d < D
    # [BM, BD]
    b_q = tl.load(q + i_bh * T * D + o_m[:, None] * D + o_d[None, :], mask=m_m[:, None] & m_d[None, :], other=0.0)
    b_m = tl.full([BM], float('-inf'), dtype=tl.float32)
    b_l = tl.zeros([BM], dtype=tl.float32)
    b_o = tl.zeros([BM, BD], dtype=tl.float32)
    # tiles past the query tile's last row are masked for every row: stop at the diagonal
    for i_n in range(0, tl.minimum((i_m + 1) * BM, T), BN):
        o_n = i_n + tl.arange(0, BN)
        m_n = o_n < T
        # [BN, BD]
        b_k = tl.load(k + i_bh * T * D + o_n[:, None] * D + o_d[None, :], mask=m_n[:, None] & m_d[None, :], other=0.0)
        b_v = tl.load(v + i_bh * T * D + o_n[:, None] * D + o_d[None, :], mask=m_n[:, None] & m_d[None, :], other=0.0)
        # [BM, BN]
        b_s = tl.dot(b_q, tl.trans(b_k)) * scale
        b_s = tl.where((o_m[:, None] >= o_n[None, :]) & m_n[None, :], b_s, float('-inf'))
        # key 0 is in the first tile and every query sees it: b_m is finite from the first tile on
        b_m, b_mp = tl.maximum(b_m, tl.max(b_s, 1)), b_m
        b_r = tl.exp(b_mp - b_m)
        b_p = tl.exp(b_s - b_m[:, None])
        b_l = b_l * b_r + tl.sum(b_p, 1)
        b_o = b_o * b_r[:, None] + tl.dot(b_p, b_v)
    tl.store(o + i_bh * T * D + o_m[:, None] * D + o_d[None, :], b_o / b_l[:, None], mask=m_m[:, None] & m_d[None, :])


def causal_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    BH, T, D = q.shape
    o = torch.empty_like(q)
    BM, BN = 16, 16
    causal_attn_fwd_kernel[(triton.cdiv(T, BM), BH)](q, k, v, o, D ** -0.5, T, D, BM=BM, BN=BN, BD=triton.next_power_of_2(D))
    return o
