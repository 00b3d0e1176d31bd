# refuse: BM is also used on line 29 \(`num_tiles = triton.cdiv\(M, BM\) \* triton.cdiv\(N, BN\)`\)
# the grid is a tile count the launcher computed from BM and BN before the launch
import torch
import triton
import triton.language as tl


@triton.jit
def matmul_kernel(a, b, c, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid = tl.program_id(0)
    num_pid_n = tl.cdiv(N, BN)
    i_m, i_n = pid // num_pid_n, pid % num_pid_n
    o_m = i_m * BM + tl.arange(0, BM)
    o_n = i_n * BN + tl.arange(0, BN)
    o_k = tl.arange(0, BK)
    b_acc = tl.zeros([BM, BN], dtype=tl.float32)
    for k in range(0, K, BK):
        b_a = tl.load(a + o_m[:, None] * K + (k + o_k)[None, :], mask=(o_m[:, None] < M) & ((k + o_k)[None, :] < K), other=0.0)
        b_b = tl.load(b + (k + o_k)[:, None] * N + o_n[None, :], mask=((k + o_k)[:, None] < K) & (o_n[None, :] < N), other=0.0)
        b_acc = tl.dot(b_a, b_b, b_acc)
    tl.store(c + o_m[:, None] * N + o_n[None, :], b_acc, mask=(o_m[:, None] < M) & (o_n[None, :] < N))


def matmul(a, b):
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty(M, N, device=a.device, dtype=torch.float32)
    BM, BN, BK = 64, 64, 32
    num_tiles = triton.cdiv(M, BM) * triton.cdiv(N, BN)
    matmul_kernel[(num_tiles,)](a, b, c, M, N, K, BM=BM, BN=BN, BK=BK)
    return c
