"""KDA-style recurrent decode: one token per sequence, fp32 state [K, V] per head.

Programs tile V in blocks of BV=32, so every V tile of a head reloads q, k, g
and recomputes the L2 norms, the gate and the beta sigmoid.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def kda_decode_kernel(
    q, k, v, g, beta, A_log, dt_bias, o, h, scale,
    H: tl.constexpr, K: tl.constexpr, V: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr,
):
    i_nh = tl.program_id(0).to(tl.int64)
    i_h = i_nh % H
    o_k = tl.arange(0, BK)
    o_v = tl.arange(0, BV)
    m_k, m_v = o_k < K, o_v < V
    m_h = m_k[:, None] & m_v[None, :]

    b_q = tl.load(q + i_nh * K + o_k, mask=m_k, other=0).to(tl.float32)
    b_k = tl.load(k + i_nh * K + o_k, mask=m_k, other=0).to(tl.float32)
    b_v = tl.load(v + i_nh * V + o_v, mask=m_v, other=0).to(tl.float32)
    b_q = b_q / tl.sqrt(tl.sum(b_q * b_q) + 1e-6) * scale
    b_k = b_k / tl.sqrt(tl.sum(b_k * b_k) + 1e-6)
    # log decay -exp(A) * softplus(g + dt_bias), [BK]
    b_g = tl.load(g + i_nh * K + o_k, mask=m_k, other=0).to(tl.float32)
    b_g += tl.load(dt_bias + i_h * K + o_k, mask=m_k, other=0)
    b_gk = -tl.exp(tl.load(A_log + i_h)) * tl.where(b_g > 20.0, b_g, tl.log(1 + tl.exp(b_g)))
    b_beta = tl.sigmoid(tl.load(beta + i_nh).to(tl.float32))

    p_h = h + i_nh * K * V + o_k[:, None] * V + o_v[None, :]
    # [BK, BV]
    b_h = tl.load(p_h, mask=m_h, other=0) * tl.exp(b_gk)[:, None]
    b_v = b_beta * (b_v - tl.sum(b_h * b_k[:, None], 0))
    b_h += b_k[:, None] * b_v[None, :]
    b_o = tl.sum(b_h * b_q[:, None], 0)
    tl.store(o + i_nh * V + o_v, b_o.to(o.dtype.element_ty), mask=m_v)
    tl.store(p_h, b_h, mask=m_h)


def kda_decode(q, k, v, g, beta, A_log, dt_bias, h):
    B, H, K, V = *q.shape, v.shape[-1]
    o = torch.empty_like(v)
    BK, BV = triton.next_power_of_2(K), triton.next_power_of_2(V)
    # one program per head holds the whole [BK, BV] fp32 state in registers
    assert BV <= 256, f"V={V} is too wide to fuse into one program per head: keep the V tiles"
    # a warp per 2048 fp32 state elements (64 registers a thread), at most 4: more warps
    # split the reductions over K across warps, through shared memory
    num_warps = min(4, max(1, BK * BV // 2048))
    grid = (B * H,)
    kda_decode_kernel[grid](q, k, v, g, beta, A_log, dt_bias, o, h, K**-0.5, H=H, K=K, V=V, BK=BK, BV=BV, num_warps=num_warps)
    return o, h
