# run: matmul a=float32[70, 40] b=float32[40, 50]
import torch
import triton
import triton.language as tl


@triton.jit
def matmul_kernel(
    a, b, c, partial, M, N, K, K_PER_SPLIT, SPLIT_K: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
):
    pid = tl.program_id(0)
    pid_k = tl.program_id(1)
    num_pid_n = tl.cdiv(N, BN)
    i_m, i_n = pid // num_pid_n, pid % num_pid_n
    o_m = i_m * BM + tl.arange(0, BM)
    o_n = i_n * BN + tl.arange(0, BN)
    o_k = tl.arange(0, BK)
    b_acc = tl.zeros([BM, BN], dtype=tl.float32)
    k_start = pid_k * K_PER_SPLIT
    k_end = tl.minimum(k_start + K_PER_SPLIT, K)
    for i_k in range(k_start, k_end, BK):
        b_a = tl.load(a + o_m[:, None] * K + (i_k + o_k)[None, :], mask=(o_m[:, None] < M) & ((i_k + o_k)[None, :] < k_end), other=0.0)
        b_b = tl.load(b + (i_k + o_k)[:, None] * N + o_n[None, :], mask=((i_k + o_k)[:, None] < k_end) & (o_n[None, :] < N), other=0.0)
        b_acc += tl.dot(b_a, b_b)
    if SPLIT_K == 1:
        tl.store(c + o_m[:, None] * N + o_n[None, :], b_acc.to(c.dtype.element_ty), mask=(o_m[:, None] < M) & (o_n[None, :] < N))
    else:
        # fp32 partials [SPLIT_K, M, N]; split_k_reduce_kernel sums them in split order
        tl.store(partial + (pid_k * M + o_m[:, None]).to(tl.int64) * N + o_n[None, :], b_acc, mask=(o_m[:, None] < M) & (o_n[None, :] < N))


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


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty(M, N, device=a.device, dtype=a.dtype)
    # split K 4 ways (fewer when K is short): programs (tile, pid_k) write fp32 partial tiles
    split_k = max(1, min(4, triton.cdiv(K, 64)))
    k_per_split = triton.cdiv(triton.cdiv(K, split_k), 64) * 64
    split_k = triton.cdiv(K, k_per_split)  # no empty split
    partial = torch.empty(split_k, M, N, device=c.device, dtype=torch.float32) if split_k > 1 else c
    grid = (triton.cdiv(M, 128) * triton.cdiv(N, 128), split_k)
    matmul_kernel[grid](a, b, c, partial, M, N, K, k_per_split, SPLIT_K=split_k, BM=128, BN=128, BK=64)
    if split_k > 1:
        split_k_reduce_kernel[(triton.cdiv(M * N, 256),)](partial, c, M * N, SPLIT_K=split_k, BLOCK=256)
    return c
