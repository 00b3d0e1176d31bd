"""Gated linear attention, recurrent form: h_t = exp(g_t)[:, None]·h_{t-1} + k_t vₜᵀ, o_t = h_tᵀ q_t.

One program per (batch·head) carries the [K, V] fp32 state in registers over
the T steps of its sequence.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def fused_recurrent_gla_fwd_kernel(q, k, v, g, o, T, K, V, BK: tl.constexpr, BV: tl.constexpr):
    i_bh = tl.program_id(0).to(tl.int64)
    o_k = tl.arange(0, BK)
    o_v = tl.arange(0, BV)
    m_k = o_k < K
    m_v = o_v < V
    # [BK, BV]
    b_h = tl.zeros([BK, BV], dtype=tl.float32)
    for i_t in range(0, T):
        b_q = tl.load(q + (i_bh * T + i_t) * K + o_k, mask=m_k, other=0.0)
        b_k = tl.load(k + (i_bh * T + i_t) * K + o_k, mask=m_k, other=0.0)
        b_g = tl.load(g + (i_bh * T + i_t) * K + o_k, mask=m_k, other=0.0)
        b_v = tl.load(v + (i_bh * T + i_t) * V + o_v, mask=m_v, other=0.0)
        b_h = b_h * tl.exp(b_g)[:, None] + b_k[:, None] * b_v[None, :]
        tl.store(o + (i_bh * T + i_t) * V + o_v, tl.sum(b_h * b_q[:, None], 0), mask=m_v)


def fused_recurrent_gla(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    BH, T, K = q.shape
    V = v.shape[-1]
    o = torch.empty(BH, T, V, dtype=torch.float32, device=q.device)
    fused_recurrent_gla_fwd_kernel[(BH,)](q, k, v, g, o, T, K, V, BK=triton.next_power_of_2(K), BV=triton.next_power_of_2(V))
    return o
