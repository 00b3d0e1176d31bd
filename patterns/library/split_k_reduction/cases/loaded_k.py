# refuse: the K loop `range\(0, K, BK\)` \(line 16\) is not a simple range over a K parameter
# grouped GEMM over experts: the K extent of each program is read from memory
import torch
import triton
import triton.language as tl


@triton.jit
def ragged_k_matmul_kernel(a, b, c, k_lens, M, N, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    i_m, i_n, i_e = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    K = tl.load(k_lens + i_e)
    o_m = i_m * BM + tl.arange(0, BM)
    o_n = i_n * BN + tl.arange(0, BN)
    o_k = tl.arange(0, BK)
    b_acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        b_a = tl.load(a + i_e * M * 4096 + o_m[:, None] * 4096 + (k + o_k)[None, :], mask=(o_m[:, None] < M) & ((k + o_k)[None, :] < K), other=0.0)
        b_b = tl.load(b + i_e * 4096 * N + (k + o_k)[:, None] * N + o_n[None, :], mask=((k + o_k)[:, None] < K) & (o_n[None, :] < N), other=0.0)
        b_acc = tl.dot(b_a, b_b, b_acc)
    tl.store(c + (i_e * M + o_m[:, None]) * N + o_n[None, :], b_acc, mask=(o_m[:, None] < M) & (o_n[None, :] < N))


def ragged_k_matmul(a, b, k_lens):
    E, M, _ = a.shape
    N = b.shape[2]
    c = torch.empty(E, M, N, device=a.device, dtype=torch.float32)
    ragged_k_matmul_kernel[(triton.cdiv(M, 32), triton.cdiv(N, 32), E)](a, b, c, k_lens, M, N, BM=32, BN=32, BK=32)
    return c
