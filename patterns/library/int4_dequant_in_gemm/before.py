"""W4A16 linear layer, out = x @ dequant(w)ᵀ, with int4 weights packed two per byte.

w_q is [N, K/2] uint8 (even k in the low nibble, odd k in the high one), one
scale per group of G input channels, zero point 8. A first kernel dequantizes
the whole weight into an fp32 [N, K] tensor; a plain GEMM then reads it.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def dequant_int4_kernel(w_q, scales, w, K, G: tl.constexpr, BK: tl.constexpr):
    i_n, i_k = tl.program_id(0).to(tl.int64), tl.program_id(1)
    o_k = i_k * BK + tl.arange(0, BK)
    m_k = o_k < K
    b_q = tl.load(w_q + i_n * (K // 2) + o_k // 2, mask=m_k, other=0)
    b_q = (b_q >> ((o_k % 2) * 4).to(tl.uint8)) & 0xF
    b_s = tl.load(scales + i_n * (K // G) + o_k // G, mask=m_k, other=0.0)
    tl.store(w + i_n * K + o_k, (b_q.to(tl.float32) - 8.0) * b_s, mask=m_k)


@triton.jit
def gemm_nt_kernel(a, b, c, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    i_m, i_n = tl.program_id(0), tl.program_id(1)
    o_m = i_m * BM + tl.arange(0, BM)
    o_n = i_n * BN + tl.arange(0, BN)
    m_m, m_n = o_m < M, o_n < N
    b_c = tl.zeros([BM, BN], dtype=tl.float32)
    for i_k in range(0, K, BK):
        o_k = i_k + tl.arange(0, BK)
        m_k = o_k < K
        b_a = tl.load(a + o_m[:, None] * K + o_k[None, :], mask=m_m[:, None] & m_k[None, :], other=0.0)
        b_b = tl.load(b + o_n[None, :] * K + o_k[:, None], mask=m_k[:, None] & m_n[None, :], other=0.0)
        b_c += tl.dot(b_a, b_b)
    tl.store(c + o_m[:, None] * N + o_n[None, :], b_c, mask=m_m[:, None] & m_n[None, :])


def w4a16_linear(x: torch.Tensor, w_q: torch.Tensor, scales: torch.Tensor, G: int) -> torch.Tensor:
    M, K = x.shape
    N = w_q.shape[0]
    w = torch.empty(N, K, dtype=torch.float32, device=x.device)  # the dequantized weight, 8x the packed bytes
    dequant_int4_kernel[(N, triton.cdiv(K, 64))](w_q, scales, w, K, G=G, BK=64)
    out = torch.empty(M, N, dtype=torch.float32, device=x.device)
    gemm_nt_kernel[(triton.cdiv(M, 16), triton.cdiv(N, 16))](x, w, out, M, N, K, BM=16, BN=16, BK=32)
    return out
