"""Linear layer y = x @ w^T (w stored [N, K] as in nn.Linear), K loop software-pipelined.

tl.range(..., num_stages=NUM_STAGES) keeps NUM_STAGES - 1 tiles of x and w in
flight in shared memory while the current tile feeds tl.dot. The depth is the
largest that fits the shared-memory budget: one stage holds (BM + BN) * BK
elements.
"""
import torch
import triton
import triton.language as tl

# per-block shared memory opt-in limit of an H100/H200 (232448 B); keep room for the epilogue
SMEM_BUDGET = 200 * 1024


@triton.jit
def linear_kernel(
    x, w, y, M, N, K,
    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, NUM_STAGES: tl.constexpr,
):
    i_m, i_n = tl.program_id(0), tl.program_id(1)
    o_m = i_m * BM + tl.arange(0, BM)
    o_n = i_n * BN + tl.arange(0, BN)
    o_k = tl.arange(0, BK)
    m_m, m_n = o_m < M, o_n < N
    # [BM, BN]
    b_y = tl.zeros((BM, BN), dtype=tl.float32)
    for i_k in tl.range(tl.cdiv(K, BK), num_stages=NUM_STAGES):
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
    stage_bytes = (BM + BN) * BK * x.element_size()
    # no deeper than the loop is long: extra stages only add prologue
    num_stages = max(1, min(4, SMEM_BUDGET // stage_bytes, triton.cdiv(K, BK)))
    grid = (triton.cdiv(M, BM), triton.cdiv(N, BN))
    linear_kernel[grid](x, w, y, M, N, K, BM=BM, BN=BN, BK=BK, NUM_STAGES=num_stages, num_warps=4)
    return y
