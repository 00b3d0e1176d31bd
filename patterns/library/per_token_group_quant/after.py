"""Dynamic 8-bit (int8) quantization of activations with one scale per token and group of G channels.

One program per (token, group) loads the group once, takes its absmax, stores
the scale s = absmax / 127 and the values clamp(x / s) rounded to int8: one read
of x, no second pass, and an outlier only coarsens its own group. The
launcher returns the dequantized values q·s.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _round(x):
    # to nearest, half away from zero (a bare .to(tl.int8) truncates)
    return tl.where(x >= 0, x + 0.5, x - 0.5)


@triton.jit
def per_token_group_quant_fwd_kernel(x, y, s, N, NG, G: tl.constexpr):
    i_m, i_g = tl.program_id(0).to(tl.int64), tl.program_id(1)
    o_n = i_g * G + tl.arange(0, G)
    m_n = o_n < N
    b_x = tl.load(x + i_m * N + o_n, mask=m_n, other=0.0).to(tl.float32)
    # the scale comes from the registers it quantizes
    b_s = tl.maximum(tl.max(tl.abs(b_x), 0), 1e-10) / 127.0
    tl.store(y + i_m * N + o_n, _round(tl.clamp(b_x / b_s, -127.0, 127.0)).to(y.dtype.element_ty), mask=m_n)
    tl.store(s + i_m * NG + i_g, b_s)


def fp8_quant_dequant(x: torch.Tensor, G: int) -> torch.Tensor:
    M, N = x.shape
    NG = triton.cdiv(N, G)
    y = torch.empty(M, N, dtype=torch.int8, device=x.device)
    s = torch.empty(M, NG, dtype=torch.float32, device=x.device)
    per_token_group_quant_fwd_kernel[(M, NG)](x, y, s, N, NG, G=G)
    return y.float() * s.repeat_interleave(G, 1)[:, :N]
