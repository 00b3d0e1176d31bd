# refuse: tiles come from a 2-D grid \(i_m = program_id\(0\), i_n = program_id\(1\)\): launch a 1-D grid of cdiv\(M, BM\)·cdiv\(N, BN\) programs with `i_m, i_n = pid // num_pid_n, pid % num_pid_n`
import torch
import triton
import triton.language as tl


@triton.jit
def skinny_matmul_kernel(x, w, y, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    i_m, i_n = tl.program_id(0), tl.program_id(1)
    o_m = i_m * BM + tl.arange(0, BM)
    o_n = i_n * BN + tl.arange(0, BN)
    o_k = tl.arange(0, BK)
    b_acc = tl.zeros([BM, BN], dtype=tl.float32)
    for i_k in range(0, K, BK):
        b_x = tl.load(x + o_m[:, None] * K + (i_k + o_k)[None, :], mask=(o_m[:, None] < M) & ((i_k + o_k)[None, :] < K), other=0.0)
        b_w = tl.load(w + (i_k + o_k)[:, None] * N + o_n[None, :], mask=((i_k + o_k)[:, None] < K) & (o_n[None, :] < N), other=0.0)
        b_acc += tl.dot(b_x, b_w)
    tl.store(y + o_m[:, None] * N + o_n[None, :], b_acc.to(y.dtype.element_ty), mask=(o_m[:, None] < M) & (o_n[None, :] < N))


def skinny_matmul(x, w):
    M, K = x.shape
    N = w.shape[1]
    y = torch.empty(M, N, device=x.device, dtype=x.dtype)
    skinny_matmul_kernel[(triton.cdiv(M, 64), triton.cdiv(N, 256))](x, w, y, M, N, K, BM=64, BN=256, BK=64)
    return y
