"""MoE / MLP activation before an 8-bit GEMM: h = silu(gate)·up, quantized per token and group of G.

gu is [M, 2·I] (gate, then up). One kernel writes h = silu(gate)·up to memory,
a second reads it back and quantizes it per (token, group) to int8 with one
scale each. The launcher returns the dequantized values q·s.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def silu_mul_fwd_kernel(gu, h, I, BI: tl.constexpr):
    i_m, i_i = tl.program_id(0).to(tl.int64), tl.program_id(1)
    o_i = i_i * BI + tl.arange(0, BI)
    m_i = o_i < I
    b_g = tl.load(gu + i_m * 2 * I + o_i, mask=m_i, other=0.0).to(tl.float32)
    b_u = tl.load(gu + i_m * 2 * I + I + o_i, mask=m_i, other=0.0).to(tl.float32)
    tl.store(h + i_m * I + o_i, b_g * tl.sigmoid(b_g) * b_u, mask=m_i)


@triton.jit
def _round(x):
    # to nearest, half away from zero (a bare .to(tl.int8) truncates)
    return tl.where(x >= 0, x + 0.5, x - 0.5)


@triton.jit
def group_quant_fwd_kernel(x, y, s, N, NG, G: tl.constexpr):
    i_m, i_g = tl.program_id(0).to(tl.int64), tl.program_id(1)
    o_n = i_g * G + tl.arange(0, G)
    m_n = o_n < N
    b_x = tl.load(x + i_m * N + o_n, mask=m_n, other=0.0).to(tl.float32)
    b_s = tl.maximum(tl.max(tl.abs(b_x), 0), 1e-10) / 127.0
    tl.store(y + i_m * N + o_n, _round(tl.clamp(b_x / b_s, -127.0, 127.0)).to(y.dtype.element_ty), mask=m_n)
    tl.store(s + i_m * NG + i_g, b_s)


def silu_mul_quant(gu: torch.Tensor, G: int) -> torch.Tensor:
    M, I = gu.shape[0], gu.shape[1] // 2
    NG = triton.cdiv(I, G)
    h = torch.empty(M, I, dtype=gu.dtype, device=gu.device)
    silu_mul_fwd_kernel[(M, NG)](gu, h, I, BI=G)
    y = torch.empty(M, I, dtype=torch.int8, device=gu.device)
    s = torch.empty(M, NG, dtype=torch.float32, device=gu.device)
    group_quant_fwd_kernel[(M, NG)](h, y, s, I, NG, G=G)
    return y.float() * s.repeat_interleave(G, 1)[:, :I]
