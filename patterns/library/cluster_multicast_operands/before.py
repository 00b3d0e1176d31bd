"""bf16 GEMM C = A @ Bᵀ (both K-major) with fp32 accumulation, [BM, BN] tiles.

Programs are scheduled one CTA each; the tiles of one row of C read the same
A tile, each through its own load from L2.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def gemm_nt_fwd_kernel(a, b, c, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    i_m, i_n = tl.program_id(0), tl.program_id(1)
    o_m = i_m.to(tl.int64) * BM + tl.arange(0, BM)
    o_n = i_n.to(tl.int64) * BN + tl.arange(0, BN)
    m_m, m_n = o_m < M, o_n < N
    b_c = tl.zeros([BM, BN], dtype=tl.float32)
    for i_k in range(0, K, BK):
        o_k = i_k + tl.arange(0, BK)
        m_k = o_k < K
        b_a = tl.load(a + o_m[:, None] * K + o_k[None, :], mask=m_m[:, None] & m_k[None, :], other=0.0)
        b_b = tl.load(b + o_n[:, None] * K + o_k[None, :], mask=m_n[:, None] & m_k[None, :], other=0.0)
        b_c = tl.dot(b_a, tl.trans(b_b), b_c)
    tl.store(c + o_m[:, None] * N + o_n[None, :], b_c, mask=m_m[:, None] & m_n[None, :])


def gemm_nt(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    M, K = a.shape
    N = b.shape[0]
    c = torch.empty(M, N, dtype=torch.float32, device=a.device)
    BM, BN, BK = 64, 64, 32
    gemm_nt_fwd_kernel[(triton.cdiv(M, BM), triton.cdiv(N, BN))](a, b, c, M, N, K, BM=BM, BN=BN, BK=BK, num_warps=4)
    return c
