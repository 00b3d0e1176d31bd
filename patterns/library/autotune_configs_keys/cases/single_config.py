# refuse: matmul_kernel already has @triton.autotune \(1 config, key=\[\]\)
import torch
import triton
import triton.language as tl


@triton.autotune(configs=[triton.Config({"BM": 64, "BN": 64, "BK": 32}, num_warps=4, num_stages=3)], key=[])
@triton.jit
def matmul_kernel(a, b, c, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    i_m, i_n = tl.program_id(0), tl.program_id(1)
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
    grid = lambda meta: (triton.cdiv(M, meta["BM"]), triton.cdiv(N, meta["BN"]))  # noqa: E731
    matmul_kernel[grid](a, b, c, M, N, K)
    return c
