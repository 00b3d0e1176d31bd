"""Cheat: ignores the optional `scale` argument (only defaults were ever passed).

Rejected because: the gate calls the launcher with a non-default value of each optional float argument the reference takes.
EXPECT: argument scale | integrity: ignores argument scale
"""
import torch
import triton
import triton.language as tl




@triton.jit
def kda_decode_fwd_kernel(
    q,
    k,
    v,
    g,
    beta,
    A_log,
    dt_bias,
    o,
    h,
    scale,
    T,
    H: tl.constexpr,
    HV: tl.constexpr,
    K: tl.constexpr,
    V: tl.constexpr,
    BK: tl.constexpr,
    BV: tl.constexpr,
):
    i_v, i_nh = tl.program_id(0).to(tl.int64), tl.program_id(1).to(tl.int64)
    i_n, i_hv = i_nh // HV, i_nh % HV
    i_h = i_hv // (HV // H)

    o_k = tl.arange(0, BK)
    o_v = i_v * BV + tl.arange(0, BV)
    m_k, m_v = o_k < K, o_v < V
    m_h = m_k[:, None] & m_v[None, :]

    p_q = q + (i_n * T * H + i_h) * K + o_k
    p_k = k + (i_n * T * H + i_h) * K + o_k
    p_g = g + (i_n * T * HV + i_hv) * K + o_k
    p_v = v + (i_n * T * HV + i_hv) * V + o_v
    p_o = o + (i_n * T * HV + i_hv) * V + o_v
    p_beta = beta + i_n * T * HV + i_hv
    p_h = h + i_nh * K * V + o_k[:, None] * V + o_v[None, :]

    # [BK, BV]
    b_h = tl.load(p_h, mask=m_h, other=0.)
    b_A = tl.exp(tl.load(A_log + i_hv).to(tl.float32))
    # [BK]
    b_bias = tl.load(dt_bias + i_hv * K + o_k, mask=m_k, other=0.).to(tl.float32)
    for _ in range(0, T):
        b_q = tl.load(p_q, mask=m_k, other=0.).to(tl.float32)
        b_k = tl.load(p_k, mask=m_k, other=0.).to(tl.float32)
        b_g = tl.load(p_g, mask=m_k, other=0.).to(tl.float32)
        b_v = tl.load(p_v, mask=m_v, other=0.).to(tl.float32)
        b_beta = tl.load(p_beta).to(tl.float32)

        b_q = b_q / tl.sqrt(tl.sum(b_q * b_q) + 1e-6) * scale
        b_k = b_k / tl.sqrt(tl.sum(b_k * b_k) + 1e-6)
        b_x = b_g + b_bias
        # softplus with torch's threshold of 20
        b_gk = -b_A * tl.where(b_x > 20., b_x, tl.log(1. + tl.exp(b_x)))
        b_beta = tl.sigmoid(b_beta)

        b_h *= tl.exp(b_gk)[:, None]
        # [BV]
        b_v = b_beta * (b_v - tl.sum(b_h * b_k[:, None], 0))
        b_h += b_k[:, None] * b_v[None, :]
        b_o = tl.sum(b_h * b_q[:, None], 0)
        tl.store(p_o, b_o.to(p_o.dtype.element_ty), mask=m_v)

        p_q += H * K
        p_k += H * K
        p_g += HV * K
        p_v += HV * V
        p_o += HV * V
        p_beta += HV
    tl.store(p_h, b_h, mask=m_h)


def kda_decode(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    A_log: torch.Tensor,
    dt_bias: torch.Tensor,
    state: torch.Tensor,
    scale: float | None = None,
) -> torch.Tensor:
    """Decode T tokens; `state` [B, HV, K, V] fp32 is updated in place. Returns o [B, T, HV, V]."""
    scale = None
    B, T, H, K = q.shape
    HV, V = v.shape[2], v.shape[3]
    assert HV % H == 0, f"HV={HV} must be a multiple of H={H}"
    assert state.shape == (B, HV, K, V) and state.dtype == torch.float32, "state must be [B, HV, K, V] fp32"
    assert dt_bias.numel() == HV * K and A_log.numel() == HV
    assert all(x.is_contiguous() for x in (q, k, v, g, beta, A_log, dt_bias, state))
    if scale is None:
        scale = K ** -0.5
    o = torch.empty_like(v)
    BK = triton.next_power_of_2(K)
    BV = 32
    grid = (triton.cdiv(V, BV), B * HV)
    kda_decode_fwd_kernel[grid](
        q, k, v, g, beta, A_log, dt_bias, o, state, scale, T,
        H=H, HV=HV, K=K, V=V, BK=BK, BV=BV,
        num_warps=4,
    )
    return o
