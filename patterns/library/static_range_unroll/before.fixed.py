"""Causal depthwise conv1d (the short convolution of Mamba / linear-attention layers).

y[t, d] = sum_j w[d, j] * x[t - W + 1 + j, d] over a width W = 4 filter. Each
program takes BT tokens by BD channels and walks the W taps in a loop.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def causal_conv1d_fwd_kernel(x, w, y, T, D, W: tl.constexpr, BT: tl.constexpr, BD: tl.constexpr):
    i_t, i_d = tl.program_id(0), tl.program_id(1)
    o_t = i_t * BT + tl.arange(0, BT)
    o_d = i_d * BD + tl.arange(0, BD)
    m_d = o_d < D
    b_y = tl.zeros([BT, BD], dtype=tl.float32)
    for i_w in tl.static_range(W):
        o_s = o_t - W + 1 + i_w
        m_s = (o_s >= 0) & (o_s < T)
        b_x = tl.load(x + o_s[:, None] * D + o_d[None, :], mask=m_s[:, None] & m_d[None, :], other=0.0).to(tl.float32)
        b_w = tl.load(w + o_d * W + i_w, mask=m_d, other=0.0).to(tl.float32)
        b_y += b_x * b_w[None, :]
    tl.store(y + o_t[:, None] * D + o_d[None, :], b_y, mask=(o_t < T)[:, None] & m_d[None, :])


def causal_conv1d(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    T, D = x.shape
    y = torch.empty_like(x)
    grid = (triton.cdiv(T, 16), triton.cdiv(D, 32))
    causal_conv1d_fwd_kernel[grid](x, w, y, T, D, W=w.shape[1], BT=16, BD=32)
    return y
