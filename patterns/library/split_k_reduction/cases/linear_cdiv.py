# run: linear x=float32[9, 70] w=float32[30, 70]
# software_pipelining_num_stages/before.py: a `range(tl.cdiv(K, BK))` loop with i_k * BK offsets
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
    b_y = tl.zeros((BM, BN), dtype=tl.float32)
    for i_k in range(tl.cdiv(K, BK)):
        m_k = (i_k * BK + o_k) < K
        b_x = tl.load(x + o_m[:, None] * K + (i_k * BK + o_k)[None, :], mask=m_m[:, None] & m_k[None, :], other=0.0)
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
