"""GEMM, baseline: one fixed tile config, programs in row-major tile order.

Consecutive programs walk along a row of C tiles, so a wave of programs shares
one row-panel of A but reads a fresh column-panel of B for every tile; no
grouping of tiles for L2 reuse and no tuning of the tile shape, warps or stages.
"""
import torch
import triton
import triton.language as tl


@triton.autotune(
    configs=[
        triton.Config({"BM": 128, "BN": 128, "BK": 32}, num_warps=4, num_stages=2),  # the launcher's fixed setting
        triton.Config({"BM": 128, "BN": 128, "BK": 64}, num_warps=4, num_stages=4),
        triton.Config({"BM": 128, "BN": 128, "BK": 64}, num_warps=8, num_stages=4),
        triton.Config({"BM": 128, "BN": 256, "BK": 64}, num_warps=8, num_stages=3),
        triton.Config({"BM": 128, "BN": 256, "BK": 64}, num_warps=8, num_stages=4),
        triton.Config({"BM": 256, "BN": 128, "BK": 64}, num_warps=8, num_stages=3),
        triton.Config({"BM": 256, "BN": 128, "BK": 64}, num_warps=8, num_stages=4),
        triton.Config({"BM": 64, "BN": 256, "BK": 64}, num_warps=4, num_stages=4),
        triton.Config({"BM": 128, "BN": 256, "BK": 32}, num_warps=8, num_stages=5),
    ],
    key=["M", "N", "K"],
)
@triton.jit
def matmul_fwd_kernel(
    a,
    b,
    c,
    M,
    N,
    K,
    stride_am,
    stride_ak,
    stride_bk,
    stride_bn,
    stride_cm,
    stride_cn,
    BM: tl.constexpr,
    BN: tl.constexpr,
    BK: tl.constexpr,
):
    i_mn = tl.program_id(0).to(tl.int64)
    NN = tl.cdiv(N, BN)
    i_m, i_n = i_mn // NN, i_mn % NN

    o_m = i_m * BM + tl.arange(0, BM)
    o_n = i_n * BN + tl.arange(0, BN)
    o_k = tl.arange(0, BK)
    m_m, m_n = o_m < M, o_n < N
    p_a = a + o_m[:, None] * stride_am + o_k[None, :] * stride_ak
    p_b = b + o_k[:, None] * stride_bk + o_n[None, :] * stride_bn

    # [BM, BN]
    b_c = tl.zeros([BM, BN], dtype=tl.float32)
    for i_k in range(0, K, BK):
        m_k = o_k < K - i_k
        # [BM, BK]
        b_a = tl.load(p_a, mask=m_m[:, None] & m_k[None, :], other=0.)
        # [BK, BN]
        b_b = tl.load(p_b, mask=m_k[:, None] & m_n[None, :], other=0.)
        b_c = tl.dot(b_a, b_b, b_c)
        p_a += BK * stride_ak
        p_b += BK * stride_bk
    p_c = c + o_m[:, None] * stride_cm + o_n[None, :] * stride_cn
    tl.store(p_c, b_c.to(c.dtype.element_ty), mask=m_m[:, None] & m_n[None, :])


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """c = a @ b with fp32 accumulation; returns c [M, N] in a.dtype."""
    M, K = a.shape
    K2, N = b.shape
    assert K == K2 and a.dtype == b.dtype
    c = torch.empty(M, N, dtype=a.dtype, device=a.device)
    grid = lambda meta: (triton.cdiv(M, meta["BM"]) * triton.cdiv(N, meta["BN"]),)  # noqa: E731
    matmul_fwd_kernel[grid](
        a, b, c, M, N, K,
        a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
    )
    return c
