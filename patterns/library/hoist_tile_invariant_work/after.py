"""KDA fused recurrence over T tokens (chunked prefill, speculative verify).

The per-head decay parameters A_log and dt_bias are loaded, and exp(A_log)
computed, inside the token loop: the loop stores o_t every step, so Triton's
loop-invariant code motion leaves the loads where they are.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def kda_fused_recurrent_fwd_kernel(
    q, k, v, g, beta, A_log, dt_bias, h0, o, ht, T,
    H: tl.constexpr, K: tl.constexpr, V: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr,
):
    i_v, i_nh = tl.program_id(0).to(tl.int64), tl.program_id(1).to(tl.int64)
    i_n, i_h = i_nh // H, i_nh % H
    o_k = tl.arange(0, BK)
    o_v = i_v * BV + tl.arange(0, BV)
    m_k, m_v = o_k < K, o_v < V
    m_h = m_k[:, None] & m_v[None, :]

    p_q = q + (i_n * T * H + i_h) * K + o_k
    p_k = k + (i_n * T * H + i_h) * K + o_k
    p_g = g + (i_n * T * H + i_h) * K + o_k
    p_v = v + (i_n * T * H + i_h) * V + o_v
    p_beta = beta + i_n * T * H + i_h
    p_o = o + (i_n * T * H + i_h) * V + o_v
    # [BK, BV]
    b_h = tl.load(h0 + i_nh * K * V + o_k[:, None] * V + o_v[None, :], mask=m_h, other=0)
    # loop-invariant: computed once here, not on every iteration
    b_A = tl.load(A_log + i_h)
    b_bias = tl.load(dt_bias + i_h * K + o_k, mask=m_k, other=0)
    for _ in range(0, T):
        b_q = tl.load(p_q, mask=m_k, other=0).to(tl.float32)
        b_k = tl.load(p_k, mask=m_k, other=0).to(tl.float32)
        b_v = tl.load(p_v, mask=m_v, other=0).to(tl.float32)
        b_g = tl.load(p_g, mask=m_k, other=0).to(tl.float32)
        b_g = b_g + b_bias
        b_gk = -tl.exp(b_A) * tl.where(b_g > 20.0, b_g, tl.log(1 + tl.exp(b_g)))
        b_beta = tl.sigmoid(tl.load(p_beta).to(tl.float32))

        b_h *= tl.exp(b_gk)[:, None]
        b_v = b_beta * (b_v - tl.sum(b_h * b_k[:, None], 0))
        b_h += b_k[:, None] * b_v[None, :]
        b_o = tl.sum(b_h * b_q[:, None], 0)
        tl.store(p_o, b_o.to(p_o.dtype.element_ty), mask=m_v)

        p_q += H * K
        p_k += H * K
        p_g += H * K
        p_v += H * V
        p_beta += H
        p_o += H * V
    tl.store(ht + i_nh * K * V + o_k[:, None] * V + o_v[None, :], b_h, mask=m_h)


def kda_fused_recurrent(q, k, v, g, beta, A_log, dt_bias, h0):
    B, T, H, K, V = *q.shape, v.shape[-1]
    o = torch.empty_like(v)
    ht = torch.empty(B, H, K, V, dtype=torch.float32, device=q.device)
    BK, BV = triton.next_power_of_2(K), 32
    grid = (triton.cdiv(V, BV), B * H)
    kda_fused_recurrent_fwd_kernel[grid](q, k, v, g, beta, A_log, dt_bias, h0, o, ht, T, H=H, K=K, V=V, BK=BK, BV=BV, num_warps=4)
    return o, ht
