"""FP8 (e4m3) linear layer, out = x @ wᵀ, with one scale per tensor.

The activation scale needs the absmax of the whole tensor (an extra pass over x
before quantization) and one outlier sets the scale for every element. The GEMM
accumulates the fp8 products in the dot's accumulator and applies the two scalar
scales once after the K loop.
"""
import torch
import triton
import triton.language as tl

FP8_MAX = 448.0


@triton.jit
def fp8_quant_kernel(x, y, s, K, BK: tl.constexpr):
    i_m = tl.program_id(0).to(tl.int64)
    o_k = tl.arange(0, BK)
    m_k = o_k < K
    b_s = tl.load(s)
    # [BK]
    b_x = tl.load(x + i_m * K + o_k, mask=m_k, other=0.0).to(tl.float32)
    b_y = tl.clamp(b_x / b_s, -448.0, 448.0)
    tl.store(y + i_m * K + o_k, b_y.to(y.dtype.element_ty), mask=m_k)


@triton.jit
def fp8_gemm_kernel(a, b, c, a_s, b_s, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    i_m, i_n = tl.program_id(0).to(tl.int64), tl.program_id(1).to(tl.int64)
    o_m = i_m * BM + tl.arange(0, BM)
    o_n = i_n * BN + tl.arange(0, BN)
    m_m, m_n = o_m < M, o_n < N
    # [BM, BN]
    b_c = tl.zeros([BM, BN], dtype=tl.float32)
    for i_k in range(0, tl.cdiv(K, BK)):
        o_k = i_k * BK + tl.arange(0, BK)
        m_k = o_k < K
        # [BM, BK] and [BK, BN], fp8
        b_a = tl.load(a + o_m[:, None] * K + o_k[None, :], mask=m_m[:, None] & m_k[None, :], other=0.0)
        b_b = tl.load(b + o_n[None, :] * K + o_k[:, None], mask=m_k[:, None] & m_n[None, :], other=0.0)
        b_c = tl.dot(b_a, b_b, b_c)
    b_c = b_c * (tl.load(a_s) * tl.load(b_s))
    tl.store(c + o_m[:, None] * N + o_n[None, :], b_c, mask=m_m[:, None] & m_n[None, :])


def quant_weight(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Offline: one scale for the whole weight."""
    s = (w.abs().amax().float() / FP8_MAX).clamp(min=1e-12)
    return (w / s).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn), s.reshape(1)


def fp8_linear(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    M, K = x.shape
    N = w.shape[0]
    w_q, w_s = quant_weight(w)
    x_s = (x.abs().amax().float() / FP8_MAX).clamp(min=1e-12).reshape(1)
    x_q = torch.empty(M, K, dtype=torch.float8_e4m3fn, device=x.device)
    fp8_quant_kernel[(M,)](x, x_q, x_s, K, BK=triton.next_power_of_2(K))
    out = torch.empty(M, N, dtype=torch.float32, device=x.device)
    BM, BN, BK = 16, 32, 128
    fp8_gemm_kernel[(triton.cdiv(M, BM), triton.cdiv(N, BN))](x_q, w_q, out, x_s, w_s, M, N, K, BM=BM, BN=BN, BK=BK)
    return out
