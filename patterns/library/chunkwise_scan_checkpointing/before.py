"""Gated linear attention forward (scalar decay per token and head), fused recurrent form.

Each program walks all T tokens of one (sequence, head, V tile) one at a time:
T dependent steps, and only B*H*NV programs to spread them over.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def fused_recurrent_fwd_kernel(
    q, k, v, g, o, ht, scale, T,
    H: tl.constexpr, K: tl.constexpr, V: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr,
):
    i_v, i_nh = tl.program_id(0).to(tl.int64), tl.program_id(1).to(tl.int64)
    i_n, i_h = i_nh // H, i_nh % H
    o_k = tl.arange(0, BK)
    o_v = i_v * BV + tl.arange(0, BV)
    m_k, m_v = o_k < K, o_v < V

    p_q = q + (i_n * T * H + i_h) * K + o_k
    p_k = k + (i_n * T * H + i_h) * K + o_k
    p_v = v + (i_n * T * H + i_h) * V + o_v
    p_g = g + i_n * T * H + i_h
    p_o = o + (i_n * T * H + i_h) * V + o_v
    # [BK, BV]
    b_h = tl.zeros([BK, BV], dtype=tl.float32)
    for _ in range(0, T):
        b_q = tl.load(p_q, mask=m_k, other=0).to(tl.float32) * scale
        b_k = tl.load(p_k, mask=m_k, other=0).to(tl.float32)
        b_v = tl.load(p_v, mask=m_v, other=0).to(tl.float32)
        b_h = b_h * tl.exp(tl.load(p_g)) + b_k[:, None] * b_v[None, :]
        tl.store(p_o, tl.sum(b_h * b_q[:, None], 0), mask=m_v)
        p_q += H * K
        p_k += H * K
        p_v += H * V
        p_g += H
        p_o += H * V
    tl.store(ht + i_nh * K * V + o_k[:, None] * V + o_v[None, :], b_h, mask=m_k[:, None] & m_v[None, :])


def gla_fwd(q, k, v, g):
    B, T, H, K, V = *q.shape, v.shape[-1]
    o = torch.empty(B, T, H, V, dtype=torch.float32, device=q.device)
    ht = torch.empty(B, H, K, V, dtype=torch.float32, device=q.device)
    BK, BV = triton.next_power_of_2(K), min(32, triton.next_power_of_2(V))
    grid = (triton.cdiv(V, BV), B * H)
    fused_recurrent_fwd_kernel[grid](q, k, v, g, o, ht, K**-0.5, T, H=H, K=K, V=V, BK=BK, BV=BV)
    return o, ht
