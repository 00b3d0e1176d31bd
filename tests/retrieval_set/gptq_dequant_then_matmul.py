"""GPTQ-style W4A16 linear: eight int4 weights per int32 along K; a kernel dequantizes the whole weight, then a GEMM reads it."""
import torch
import triton
import triton.language as tl


@triton.jit
def dequant_gptq_kernel(qweight, scales, w, K, N, GROUP: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_N: tl.constexpr):
    pid_k, pid_n = tl.program_id(0), tl.program_id(1)
    offs_k = pid_k * BLOCK_K + tl.arange(0, BLOCK_K)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (offs_k[:, None] < K) & (offs_n[None, :] < N)
    packed = tl.load(qweight + (offs_k[:, None] // 8) * N + offs_n[None, :], mask=mask, other=0)
    q = (packed >> ((offs_k[:, None] % 8) * 4)) & 0xF
    s = tl.load(scales + (offs_k[:, None] // GROUP) * N + offs_n[None, :], mask=mask, other=0.0)
    tl.store(w + offs_k[:, None] * N + offs_n[None, :], (q.to(tl.float32) - 8.0) * s, mask=mask)


@triton.jit
def matmul_kernel(a, b, c, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid_m, pid_n = tl.program_id(0), tl.program_id(1)
    offs_m = pid_m * BM + tl.arange(0, BM)
    offs_n = pid_n * BN + tl.arange(0, BN)
    acc = tl.zeros([BM, BN], dtype=tl.float32)
    for k0 in range(0, K, BK):
        offs_k = k0 + tl.arange(0, BK)
        x = tl.load(a + offs_m[:, None] * K + offs_k[None, :], mask=(offs_m[:, None] < M) & (offs_k[None, :] < K), other=0.0)
        y = tl.load(b + offs_k[:, None] * N + offs_n[None, :], mask=(offs_k[:, None] < K) & (offs_n[None, :] < N), other=0.0)
        acc += tl.dot(x, y)
    tl.store(c + offs_m[:, None] * N + offs_n[None, :], acc, mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


def gptq_linear(x, qweight, scales, group: int):
    M, K = x.shape
    N = qweight.shape[1]
    w = torch.empty(K, N, dtype=torch.float32, device=x.device)
    dequant_gptq_kernel[(triton.cdiv(K, 32), triton.cdiv(N, 32))](qweight, scales, w, K, N, GROUP=group, BLOCK_K=32, BLOCK_N=32)
    out = torch.empty(M, N, dtype=torch.float32, device=x.device)
    matmul_kernel[(triton.cdiv(M, 16), triton.cdiv(N, 16))](x, w, out, M, N, K, BM=16, BN=16, BK=32)
    return out
