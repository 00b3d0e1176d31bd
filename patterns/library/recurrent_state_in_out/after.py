"""Gated linear attention, recurrent form: h_t = exp(g_t)[:, None]·h_{t-1} + k_t vₜᵀ, o_t = h_tᵀ q_t.

One program per (batch·head) carries the [K, V] fp32 state in registers over
the T steps of its sequence.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def fused_recurrent_gla_fwd_kernel(
    q, k, v, g, o, T, K, V, h0, ht, BK: tl.constexpr, BV: tl.constexpr, USE_INITIAL_STATE: tl.constexpr, STORE_FINAL_STATE: tl.constexpr,
):
    i_bh = tl.program_id(0).to(tl.int64)
    o_k = tl.arange(0, BK)
    o_v = tl.arange(0, BV)
    m_k = o_k < K
    m_v = o_v < V
    # [BK, BV]
    b_h = tl.zeros([BK, BV], dtype=tl.float32)
    if USE_INITIAL_STATE:
        b_h += tl.load(h0 + i_bh * K * V + o_k[:, None] * V + o_v[None, :], mask=m_k[:, None] & m_v[None, :], other=0.0).to(tl.float32)
    for i_t in range(0, T):
        b_q = tl.load(q + (i_bh * T + i_t) * K + o_k, mask=m_k, other=0.0)
        b_k = tl.load(k + (i_bh * T + i_t) * K + o_k, mask=m_k, other=0.0)
        b_g = tl.load(g + (i_bh * T + i_t) * K + o_k, mask=m_k, other=0.0)
        b_v = tl.load(v + (i_bh * T + i_t) * V + o_v, mask=m_v, other=0.0)
        b_h = b_h * tl.exp(b_g)[:, None] + b_k[:, None] * b_v[None, :]
        tl.store(o + (i_bh * T + i_t) * V + o_v, tl.sum(b_h * b_q[:, None], 0), mask=m_v)
    if STORE_FINAL_STATE:
        tl.store(ht + i_bh * K * V + o_k[:, None] * V + o_v[None, :], b_h, mask=m_k[:, None] & m_v[None, :])


def fused_recurrent_gla(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor, initial_state: torch.Tensor | None = None, output_final_state: bool = False,
) -> torch.Tensor:
    BH, T, K = q.shape
    V = v.shape[-1]
    o = torch.empty(BH, T, V, dtype=torch.float32, device=q.device)
    final_state = torch.empty(BH, K, V, dtype=torch.float32, device=q.device) if output_final_state else None
    fused_recurrent_gla_fwd_kernel[(BH,)](
        q, k, v, g, o, T, K, V, initial_state, final_state, BK=triton.next_power_of_2(K), BV=triton.next_power_of_2(V), USE_INITIAL_STATE=initial_state is not None, STORE_FINAL_STATE=output_final_state,
    )
    return (o, final_state) if output_final_state else o
