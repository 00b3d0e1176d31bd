"""LoRA-A shrink y = x @ w^T: few tokens (M), rank R = N <= 64, hidden size K in the thousands.

One program per [BM, BN] output tile walks the whole K loop: with M·R this small
the grid is a handful of programs and most SMs stay idle.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def lora_shrink_kernel(
    x, w, y, partial, M, N, K, K_PER_SPLIT, SPLIT_K: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
):
    i_m, i_n, i_k = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    o_m = i_m * BM + tl.arange(0, BM)
    o_n = i_n * BN + tl.arange(0, BN)
    o_k = tl.arange(0, BK)
    m_m, m_n = o_m < M, o_n < N
    # [BM, BN]
    b_y = tl.zeros((BM, BN), dtype=tl.float32)
    k_start = i_k * K_PER_SPLIT
    k_end = tl.minimum(k_start + K_PER_SPLIT, K)
    for k in range(k_start, k_end, BK):
        m_k = (k + o_k) < k_end
        # [BM, BK]
        b_x = tl.load(x + o_m[:, None] * K + (k + o_k)[None, :], mask=m_m[:, None] & m_k[None, :], other=0.0)
        # [BN, BK]
        b_w = tl.load(w + o_n[:, None] * K + (k + o_k)[None, :], mask=m_n[:, None] & m_k[None, :], other=0.0)
        b_y = tl.dot(b_x, tl.trans(b_w), b_y)
    if SPLIT_K == 1:
        tl.store(y + o_m[:, None] * N + o_n[None, :], b_y.to(y.dtype.element_ty), mask=m_m[:, None] & m_n[None, :])
    else:
        # fp32 partials [SPLIT_K, M, N]; split_k_reduce_kernel sums them in split order
        tl.store(partial + (i_k * M + o_m[:, None]).to(tl.int64) * N + o_n[None, :], b_y, mask=m_m[:, None] & m_n[None, :])


@triton.jit
def split_k_reduce_kernel(partial, y, MN, SPLIT_K: tl.constexpr, BLOCK: tl.constexpr):
    o = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = o < MN
    p = partial + o
    # [BLOCK], summed in split order: the same bits on every run
    b_y = tl.zeros([BLOCK], dtype=tl.float32)
    for _ in range(SPLIT_K):
        b_y += tl.load(p, mask=m, other=0.0)
        p += MN
    tl.store(y + o, b_y.to(y.dtype.element_ty), mask=m)


def lora_shrink(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    M, K = x.shape
    N = w.shape[0]
    y = torch.empty(M, N, device=x.device, dtype=x.dtype)
    BM, BN, BK = 16, 16, 32
    # split K 4 ways (fewer when K is short): programs (tile, i_k) write fp32 partial tiles
    split_k = max(1, min(4, triton.cdiv(K, BK)))
    k_per_split = triton.cdiv(triton.cdiv(K, split_k), BK) * BK
    split_k = triton.cdiv(K, k_per_split)  # no empty split
    partial = torch.empty(split_k, M, N, device=y.device, dtype=torch.float32) if split_k > 1 else y
    grid = (triton.cdiv(M, BM), triton.cdiv(N, BN), split_k)
    lora_shrink_kernel[grid](x, w, y, partial, M, N, K, k_per_split, SPLIT_K=split_k, BM=BM, BN=BN, BK=BK)
    if split_k > 1:
        split_k_reduce_kernel[(triton.cdiv(M * N, 256),)](partial, y, M * N, SPLIT_K=split_k, BLOCK=256)
    return y
