"""Grouped GEMM for MoE experts: out[rows of g] = x[rows of g] @ w[g]ᵀ for G groups.

x is [total_M, K] with the rows of group g at offsets[g]:offsets[g + 1] (tokens
sorted by expert), w is [G, N, K]. The launcher reads the offsets on the host
and launches one GEMM per group.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def gemm_nt_kernel(a, b, c, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    i_m, i_n = tl.program_id(0), tl.program_id(1)
    o_m = i_m * BM + tl.arange(0, BM)
    o_n = i_n * BN + tl.arange(0, BN)
    m_m, m_n = o_m < M, o_n < N
    # [BM, BN]
    b_c = tl.zeros([BM, BN], dtype=tl.float32)
    for i_k in range(0, K, BK):
        o_k = i_k + tl.arange(0, BK)
        m_k = o_k < K
        b_a = tl.load(a + o_m[:, None] * K + o_k[None, :], mask=m_m[:, None] & m_k[None, :], other=0.0)
        b_b = tl.load(b + o_n[None, :] * K + o_k[:, None], mask=m_k[:, None] & m_n[None, :], other=0.0)
        b_c += tl.dot(b_a, b_b)
    tl.store(c + o_m[:, None] * N + o_n[None, :], b_c, mask=m_m[:, None] & m_n[None, :])


def grouped_gemm(x: torch.Tensor, w: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    G, N, K = w.shape
    out = torch.empty(x.shape[0], N, dtype=torch.float32, device=x.device)
    BM, BN, BK = 16, 16, 32
    offs = offsets.tolist()  # a device-to-host copy, then G launches
    for g in range(G):
        s, e = offs[g], offs[g + 1]
        if e > s:
            gemm_nt_kernel[(triton.cdiv(e - s, BM), triton.cdiv(N, BN))](x[s:e], w[g], out[s:e], e - s, N, K, BM=BM, BN=BN, BK=BK)
    return out
