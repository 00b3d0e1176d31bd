"""MXFP8 GEMM, out = dequant(a) @ dequant(b)ᵀ: e4m3 elements with one E8M0 (power-of-two) scale per 32 along K.

a is [M, K] e4m3 with a_s [M, K/32] uint8 exponents (scale 2^(a_s - 127)), b
likewise [N, K] with b_s [N, K/32]. tl.dot_scaled takes the 8-bit tiles and
their exponents as they are: on GPUs with microscaling tensor cores
(Blackwell, MI355) the scales are applied inside the MMA.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def mxfp8_gemm_kernel(a, a_s, b, b_s, c, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    i_m, i_n = tl.program_id(0), tl.program_id(1)
    o_m = i_m * BM + tl.arange(0, BM)
    o_n = i_n * BN + tl.arange(0, BN)
    o_s = tl.arange(0, BK // 32)
    m_m, m_n = o_m < M, o_n < N
    b_c = tl.zeros([BM, BN], dtype=tl.float32)
    for i_k in range(0, K, BK):
        o_k = i_k + tl.arange(0, BK)
        # [BM, BK] and [BK, BN] e4m3, [BM, BK/32] and [BN, BK/32] exponents
        b_a = tl.load(a + o_m[:, None] * K + o_k[None, :], mask=m_m[:, None], other=0.0)
        b_b = tl.load(b + o_n[None, :] * K + o_k[:, None], mask=m_n[None, :], other=0.0)
        b_as = tl.load(a_s + o_m[:, None] * (K // 32) + i_k // 32 + o_s[None, :], mask=m_m[:, None], other=0)
        b_bs = tl.load(b_s + o_n[:, None] * (K // 32) + i_k // 32 + o_s[None, :], mask=m_n[:, None], other=0)
        b_c = tl.dot_scaled(b_a, b_as, "e4m3", b_b, b_bs, "e4m3", b_c)
    tl.store(c + o_m[:, None] * N + o_n[None, :], b_c, mask=m_m[:, None] & m_n[None, :])


def mxfp8_gemm(a: torch.Tensor, a_s: torch.Tensor, b: torch.Tensor, b_s: torch.Tensor) -> torch.Tensor:
    a, b = a.view(torch.float8_e4m3fn), b.view(torch.float8_e4m3fn)  # e4m3 bits passed as uint8
    M, K = a.shape
    N = b.shape[0]
    c = torch.empty(M, N, dtype=torch.float32, device=a.device)
    mxfp8_gemm_kernel[(triton.cdiv(M, 16), triton.cdiv(N, 16))](a, a_s, b, b_s, c, M, N, K, BM=16, BN=16, BK=64)
    return c
