"""Linear layer y = x @ w^T (w stored [N, K] as in nn.Linear), K loop not pipelined.

Launched with num_stages=1: each iteration issues its loads and waits for them
before the tl.dot, so memory latency and tensor-core work never overlap.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def linear_kernel(x, w, y, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    i_m, i_n = tl.program_id(0), tl.program_id(1)
    o_m = i_m * BM + tl.arange(0, BM)
    o_n = i_n * BN + tl.arange(0, BN)
    o_k = tl.arange(0, BK)
    m_m, m_n = o_m < M, o_n < N
    # [BM, BN]
    b_y = tl.zeros((BM, BN), dtype=tl.float32)
    for i_k in tl.range(tl.cdiv(K, BK), num_stages=3):
        m_k = (i_k * BK + o_k) < K
        # [BM, BK]
        b_x = tl.load(x + o_m[:, None] * K + (i_k * BK + o_k)[None, :], mask=m_m[:, None] & m_k[None, :], other=0.0)
        # [BN, BK]
        b_w = tl.load(w + o_n[:, None] * K + (i_k * BK + o_k)[None, :], mask=m_n[:, None] & m_k[None, :], other=0.0)
        b_y = tl.dot(b_x, tl.trans(b_w), b_y)
    tl.store(y + o_m[:, None] * N + o_n[None, :], b_y.to(y.dtype.element_ty), mask=m_m[:, None] & m_n[None, :])


def linear(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    M, K = x.shape
    N = w.shape[0]
    y = torch.empty(M, N, device=x.device, dtype=x.dtype)
    BM, BN, BK = 32, 32, 32
    grid = (triton.cdiv(M, BM), triton.cdiv(N, BN))
    linear_kernel[grid](x, w, y, M, N, K, BM=BM, BN=BN, BK=BK, num_warps=4, num_stages=1)
    return y
