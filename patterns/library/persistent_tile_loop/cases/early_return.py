# refuse: the early `return` on line 14 would also drop the program's later tiles: turn it into an `if` around the tile body
# MoE-style: programs past the end of the routed rows leave early
import torch
import triton
import triton.language as tl


@triton.jit
def grouped_rows_kernel(a, b, c, num_rows, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid = tl.program_id(0)
    num_pid_n = tl.cdiv(N, BN)
    i_m, i_n = pid // num_pid_n, pid % num_pid_n
    if i_m * BM >= tl.load(num_rows):
        return
    o_m = i_m * BM + tl.arange(0, BM)
    o_n = i_n * BN + tl.arange(0, BN)
    o_k = tl.arange(0, BK)
    b_acc = tl.zeros([BM, BN], dtype=tl.float32)
    for k in range(0, K, BK):
        b_a = tl.load(a + o_m[:, None] * K + (k + o_k)[None, :], mask=(o_m[:, None] < M) & ((k + o_k)[None, :] < K), other=0.0)
        b_b = tl.load(b + (k + o_k)[:, None] * N + o_n[None, :], mask=((k + o_k)[:, None] < K) & (o_n[None, :] < N), other=0.0)
        b_acc = tl.dot(b_a, b_b, b_acc)
    tl.store(c + o_m[:, None] * N + o_n[None, :], b_acc, mask=(o_m[:, None] < M) & (o_n[None, :] < N))


def grouped_rows(a, b, num_rows):
    M, K = a.shape
    N = b.shape[1]
    c = torch.zeros(M, N, device=a.device, dtype=torch.float32)
    grouped_rows_kernel[(triton.cdiv(M, 64) * triton.cdiv(N, 64),)](a, b, c, num_rows, M, N, K, BM=64, BN=64, BK=32)
    return c
