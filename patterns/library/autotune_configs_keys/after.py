"""In-place GEMM accumulate c += a @ b, tile configuration chosen by @triton.autotune.

The key holds the launcher's weight dims (N, K) and a bucket of the token count
M: a new M inside a known bucket reuses the tuned config instead of re-tuning.
`c` is read and written in place, so the autotuner restores it after every
timing run.
"""
import torch
import triton
import triton.language as tl


@triton.autotune(
    configs=[
        triton.Config({'BM': 16, 'BN': 32, 'BK': 32}, num_warps=4, num_stages=4),
        triton.Config({'BM': 32, 'BN': 32, 'BK': 32}, num_warps=4, num_stages=3),
        triton.Config({'BM': 32, 'BN': 64, 'BK': 16}, num_warps=8, num_stages=3),
    ],
    key=['N', 'K', 'M_BUCKET'],
    restore_value=['c'],
)
@triton.jit(do_not_specialize=['M'])
def matmul_acc_kernel(
    a, b, c, M, N, K,
    M_BUCKET: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
):
    i_m, i_n = tl.program_id(0), tl.program_id(1)
    o_m = i_m * BM + tl.arange(0, BM)
    o_n = i_n * BN + tl.arange(0, BN)
    o_k = tl.arange(0, BK)
    m_m, m_n = o_m < M, o_n < N
    # [BM, BN]
    b_acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        m_k = (k + o_k) < K
        # [BM, BK]
        b_a = tl.load(a + o_m[:, None] * K + (k + o_k)[None, :], mask=m_m[:, None] & m_k[None, :], other=0.0)
        # [BK, BN]
        b_b = tl.load(b + (k + o_k)[:, None] * N + o_n[None, :], mask=m_k[:, None] & m_n[None, :], other=0.0)
        b_acc = tl.dot(b_a, b_b, b_acc)
    p_c = c + o_m[:, None] * N + o_n[None, :]
    m_c = m_m[:, None] & m_n[None, :]
    b_c = tl.load(p_c, mask=m_c, other=0.0).to(tl.float32) + b_acc
    tl.store(p_c, b_c.to(c.dtype.element_ty), mask=m_c)


def matmul_acc_(c: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    M, K = a.shape
    N = b.shape[1]
    # a handful of buckets: decode sizes tune separately, large prefills share one
    M_BUCKET = min(triton.next_power_of_2(M), 4096)

    def grid(meta):
        return (triton.cdiv(M, meta['BM']), triton.cdiv(N, meta['BN']))
    matmul_acc_kernel[grid](a, b, c, M, N, K, M_BUCKET=M_BUCKET)
    return c
