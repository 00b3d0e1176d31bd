"""LoRA-A shrink y = x @ w^T: few tokens (M), rank R = N <= 64, hidden size K in the thousands.

Split-K: program (i_m, i_n, i_k) reduces only its K range [i_k·K_PER_SPLIT,
(i_k+1)·K_PER_SPLIT) and writes an fp32 partial tile; a second kernel sums the
SPLIT_K partials in a fixed order, so the result is deterministic run to run.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def lora_shrink_kernel(
    x, w, y, partial, M, N, K, K_PER_SPLIT,
    SPLIT_K: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
):
    i_m, i_n, i_k = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    o_m = i_m * BM + tl.arange(0, BM)
    o_n = i_n * BN + tl.arange(0, BN)
    o_k = tl.arange(0, BK)
    m_m, m_n = o_m < M, o_n < N
    k_start = i_k * K_PER_SPLIT
    k_end = tl.minimum(k_start + K_PER_SPLIT, K)
    # [BM, BN]
    b_y = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(k_start, k_end, BK):
        m_k = (k + o_k) < k_end
        # [BM, BK]
        b_x = tl.load(x + o_m[:, None] * K + (k + o_k)[None, :], mask=m_m[:, None] & m_k[None, :], other=0.0)
        # [BN, BK]
        b_w = tl.load(w + o_n[:, None] * K + (k + o_k)[None, :], mask=m_n[:, None] & m_k[None, :], other=0.0)
        b_y = tl.dot(b_x, tl.trans(b_w), b_y)
    m_y = m_m[:, None] & m_n[None, :]
    if SPLIT_K == 1:
        tl.store(y + o_m[:, None] * N + o_n[None, :], b_y.to(y.dtype.element_ty), mask=m_y)
    else:
        # fp32 partials [SPLIT_K, M, N]; summed by split_k_reduce_kernel
        tl.store(partial + (i_k * M + o_m[:, None]).to(tl.int64) * N + o_n[None, :], b_y, mask=m_y)


@triton.jit
def split_k_reduce_kernel(partial, y, MN, SPLIT_K: tl.constexpr, BLOCK: tl.constexpr):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = o < MN
    b_y = tl.zeros([BLOCK], dtype=tl.float32)
    for i_k in range(SPLIT_K):
        b_y += tl.load(partial + i_k * MN + o, mask=m, other=0.0)
    tl.store(y + o, b_y.to(y.dtype.element_ty), mask=m)


def lora_shrink(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    M, K = x.shape
    N = w.shape[0]
    y = torch.empty(M, N, device=x.device, dtype=x.dtype)
    BM, BN, BK = 16, 16, 32
    num_sms = torch.cuda.get_device_properties(x.device).multi_processor_count if x.is_cuda else 8
    tiles = triton.cdiv(M, BM) * triton.cdiv(N, BN)
    # enough splits to fill the SMs, but at least 4 K blocks per split
    split_k = max(1, min(num_sms // tiles, triton.cdiv(K, 4 * BK)))
    k_per_split = triton.cdiv(triton.cdiv(K, split_k), BK) * BK
    split_k = triton.cdiv(K, k_per_split)
    partial = torch.empty(split_k, M, N, device=x.device, dtype=torch.float32) if split_k > 1 else y
    grid = (triton.cdiv(M, BM), triton.cdiv(N, BN), split_k)
    lora_shrink_kernel[grid](x, w, y, partial, M, N, K, k_per_split, SPLIT_K=split_k, BM=BM, BN=BN, BK=BK)
    if split_k > 1:
        BLOCK = 256
        split_k_reduce_kernel[(triton.cdiv(M * N, BLOCK),)](partial, y, M * N, SPLIT_K=split_k, BLOCK=BLOCK)
    return y
