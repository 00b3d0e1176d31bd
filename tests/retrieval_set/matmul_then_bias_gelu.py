"""A GEMM whose output is re-read by a second kernel for bias + GELU."""
import torch
import triton
import triton.language as tl


@triton.jit
def linear_kernel(a, b, c, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    i_m, i_n = tl.program_id(0), tl.program_id(1)
    o_m = i_m * BM + tl.arange(0, BM)
    o_n = i_n * BN + tl.arange(0, BN)
    o_k = tl.arange(0, BK)
    b_acc = tl.zeros([BM, BN], dtype=tl.float32)
    for i_k in range(0, K, BK):
        b_a = tl.load(a + o_m[:, None] * K + (i_k + o_k)[None, :], mask=(o_m[:, None] < M) & ((i_k + o_k)[None, :] < K), other=0.0)
        b_b = tl.load(b + (i_k + o_k)[:, None] * N + o_n[None, :], mask=((i_k + o_k)[:, None] < K) & (o_n[None, :] < N), other=0.0)
        b_acc += tl.dot(b_a, b_b)
    tl.store(c + o_m[:, None] * N + o_n[None, :], b_acc, mask=(o_m[:, None] < M) & (o_n[None, :] < N))


@triton.jit
def bias_gelu_kernel(c, bias, y, M, N, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    o = pid * BLOCK + tl.arange(0, BLOCK)
    m = o < M * N
    b_c = tl.load(c + o, mask=m, other=0.0) + tl.load(bias + o % N, mask=m, other=0.0)
    tl.store(y + o, 0.5 * b_c * (1.0 + tl.erf(b_c * 0.7071067811865476)), mask=m)


def linear_gelu(a: torch.Tensor, w: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    M, K = a.shape
    N = w.shape[1]
    c = torch.empty(M, N, device=a.device, dtype=torch.float32)
    linear_kernel[(triton.cdiv(M, 64), triton.cdiv(N, 64))](a, w, c, M, N, K, BM=64, BN=64, BK=32)
    y = torch.empty_like(c)
    bias_gelu_kernel[(triton.cdiv(M * N, 1024),)](c, bias, y, M, N, BLOCK=1024)
    return y
