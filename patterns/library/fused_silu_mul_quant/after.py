"""MoE / MLP activation before an 8-bit GEMM: h = silu(gate)·up, quantized per token and group of G.

gu is [M, 2·I] (gate, then up). One program per (token, group) computes
silu(gate)·up in fp32 registers, takes the group's absmax and stores the int8
values and the scale: h never goes to memory. The launcher returns the
dequantized values q·s.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _round(x):
    # to nearest, half away from zero (a bare .to(tl.int8) truncates)
    return tl.where(x >= 0, x + 0.5, x - 0.5)


@triton.jit
def silu_mul_quant_fwd_kernel(gu, y, s, I, NG, G: tl.constexpr):
    i_m, i_g = tl.program_id(0).to(tl.int64), tl.program_id(1)
    o_i = i_g * G + tl.arange(0, G)
    m_i = o_i < I
    b_g = tl.load(gu + i_m * 2 * I + o_i, mask=m_i, other=0.0).to(tl.float32)
    b_u = tl.load(gu + i_m * 2 * I + I + o_i, mask=m_i, other=0.0).to(tl.float32)
    b_h = b_g * tl.sigmoid(b_g) * b_u
    b_s = tl.maximum(tl.max(tl.abs(b_h), 0), 1e-10) / 127.0
    tl.store(y + i_m * I + o_i, _round(tl.clamp(b_h / b_s, -127.0, 127.0)).to(y.dtype.element_ty), mask=m_i)
    tl.store(s + i_m * NG + i_g, b_s)


def silu_mul_quant(gu: torch.Tensor, G: int) -> torch.Tensor:
    M, I = gu.shape[0], gu.shape[1] // 2
    NG = triton.cdiv(I, G)
    y = torch.empty(M, I, dtype=torch.int8, device=gu.device)
    s = torch.empty(M, NG, dtype=torch.float32, device=gu.device)
    silu_mul_quant_fwd_kernel[(M, NG)](gu, y, s, I, NG, G=G)
    return y.float() * s.repeat_interleave(G, 1)[:, :I]
