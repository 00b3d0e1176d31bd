"""8-bit quantization of activations per token and group of G channels, scales stored as UE8M0 exponents.

Each group's scale is rounded up to a power of two, s = 2^ceil(log2(absmax /
Q_MAX)), and stored as one biased exponent byte e = log2(s) + 127 (UE8M0):
a quarter of the fp32 scale bytes, dividing by s is exact, and the bytes are
what block-scaled tensor cores (and DeepGEMM's sm100 kernels) read. The
launcher returns the dequantized values q·2^(e - 127).
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _round(x):
    # to nearest, half away from zero (a bare .to(tl.int8) truncates)
    return tl.where(x >= 0, x + 0.5, x - 0.5)


@triton.jit
def group_quant_ue8m0_fwd_kernel(x, y, e, N, NG, G: tl.constexpr):
    i_m, i_g = tl.program_id(0).to(tl.int64), tl.program_id(1)
    o_n = i_g * G + tl.arange(0, G)
    m_n = o_n < N
    b_x = tl.load(x + i_m * N + o_n, mask=m_n, other=0.0).to(tl.float32)
    # the smallest power of two that keeps the group's absmax inside the 8-bit range
    b_e = tl.ceil(tl.log2(tl.maximum(tl.max(tl.abs(b_x), 0), 1e-30) / 127.0))
    b_e = tl.minimum(tl.maximum(b_e, -127.0), 127.0)
    tl.store(y + i_m * N + o_n, _round(tl.clamp(b_x * tl.exp2(-b_e), -127.0, 127.0)).to(y.dtype.element_ty), mask=m_n)
    tl.store(e + i_m * NG + i_g, (b_e + 127.0).to(tl.uint8))


def quant_dequant(x: torch.Tensor, G: int) -> torch.Tensor:
    M, N = x.shape
    NG = triton.cdiv(N, G)
    y = torch.empty(M, N, dtype=torch.int8, device=x.device)
    e = torch.empty(M, NG, dtype=torch.uint8, device=x.device)
    group_quant_ue8m0_fwd_kernel[(M, NG)](x, y, e, N, NG, G=G)
    return y.float() * torch.exp2(e.float() - 127.0).repeat_interleave(G, 1)[:, :N]
