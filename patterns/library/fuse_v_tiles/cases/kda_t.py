# FLA-style KDA decode over T tokens (kernels/kda_decode/baseline.py, trimmed): GVA heads,
# grid held in a variable, BV on its own line, a multi-line launch
import torch
import triton
import triton.language as tl


@triton.jit
def kda_decode_fwd_kernel(
    q,
    k,
    v,
    g,
    A_log,
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
    p_h = h + i_nh * K * V + o_k[:, None] * V + o_v[None, :]

    # [BK, BV]
    b_h = tl.load(p_h, mask=m_h, other=0.)
    b_A = tl.exp(tl.load(A_log + i_hv).to(tl.float32))
    for _ in range(0, T):
        b_q = tl.load(p_q, mask=m_k, other=0.).to(tl.float32)
        b_k = tl.load(p_k, mask=m_k, other=0.).to(tl.float32)
        b_g = tl.load(p_g, mask=m_k, other=0.).to(tl.float32)
        b_v = tl.load(p_v, mask=m_v, other=0.).to(tl.float32)
        b_q = b_q / tl.sqrt(tl.sum(b_q * b_q) + 1e-6) * scale
        b_k = b_k / tl.sqrt(tl.sum(b_k * b_k) + 1e-6)
        b_h *= tl.exp(-b_A * tl.where(b_g > 20., b_g, tl.log(1. + tl.exp(b_g))))[:, None]
        b_v = b_v - tl.sum(b_h * b_k[:, None], 0)
        b_h += b_k[:, None] * b_v[None, :]
        tl.store(p_o, tl.sum(b_h * b_q[:, None], 0).to(p_o.dtype.element_ty), mask=m_v)
        p_q += H * K
        p_k += H * K
        p_g += HV * K
        p_v += HV * V
        p_o += HV * V
    tl.store(p_h, b_h, mask=m_h)


def kda_decode(q, k, v, g, A_log, state, scale=None):
    B, T, H, K = q.shape
    HV, V = v.shape[2], v.shape[3]
    if scale is None:
        scale = K ** -0.5
    o = torch.empty_like(v)
    BK = triton.next_power_of_2(K)
    BV = 32
    grid = (triton.cdiv(V, BV), B * HV)
    kda_decode_fwd_kernel[grid](
        q, k, v, g, A_log, o, state, scale, T,
        H=H, HV=HV, K=K, V=V, BK=BK, BV=BV,
        num_warps=4,
    )
    return o
