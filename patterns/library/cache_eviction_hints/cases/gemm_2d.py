# refuse: the only tile loads of bias_matmul_kernel not shared between programs are written back in place \(line 20\): with nothing to mark evict_first
# tests/retrieval_set/gemm_naive.py on a 2-D grid: A is shared along N tiles, B along M tiles, and C, the one
# load no other program reads, is accumulated into in place: nothing streams to mark evict_first
import torch
import triton
import triton.language as tl


@triton.jit
def bias_matmul_kernel(a, b, bias, c, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    i_m, i_n = tl.program_id(0), tl.program_id(1)
    o_m = i_m * BM + tl.arange(0, BM)
    o_n = i_n * BN + tl.arange(0, BN)
    o_k = tl.arange(0, BK)
    b_acc = tl.zeros([BM, BN], dtype=tl.float32)
    for i_k in range(0, K, BK):
        b_a = tl.load(a + o_m[:, None] * K + (i_k + o_k)[None, :], mask=(o_m[:, None] < M) & ((i_k + o_k)[None, :] < K), other=0.0)
        b_b = tl.load(b + (i_k + o_k)[:, None] * N + o_n[None, :], mask=((i_k + o_k)[:, None] < K) & (o_n[None, :] < N), other=0.0)
        b_acc += tl.dot(b_a, b_b)
    b_c = tl.load(c + o_m[:, None] * N + o_n[None, :], mask=(o_m[:, None] < M) & (o_n[None, :] < N), other=0.0)
    b_acc += b_c + tl.load(bias + o_n, mask=o_n < N, other=0.0)[None, :]
    tl.store(c + o_m[:, None] * N + o_n[None, :], b_acc, mask=(o_m[:, None] < M) & (o_n[None, :] < N))


def bias_matmul_(c, a, b, bias):
    M, K = a.shape
    N = b.shape[1]
    bias_matmul_kernel[(triton.cdiv(M, 64), triton.cdiv(N, 64))](a, b, bias, c, M, N, K, BM=64, BN=64, BK=32)
    return c
