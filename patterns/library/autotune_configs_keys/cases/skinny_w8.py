# tests/retrieval_set/skinny_gemm.py with an int8 weight scale: inline 2-D grid, the block names differ from the host's
import torch
import triton
import triton.language as tl


@triton.jit
def w8_matmul_kernel(x, w, s, y, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    i_m, i_n = tl.program_id(0), tl.program_id(1)
    o_m = i_m * BLOCK_M + tl.arange(0, BLOCK_M)
    o_n = i_n * BLOCK_N + tl.arange(0, BLOCK_N)
    o_k = tl.arange(0, BLOCK_K)
    b_acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for i_k in range(0, K, BLOCK_K):
        b_x = tl.load(x + o_m[:, None] * K + (i_k + o_k)[None, :], mask=(o_m[:, None] < M) & ((i_k + o_k)[None, :] < K), other=0.0)
        b_w = tl.load(w + (i_k + o_k)[:, None] * N + o_n[None, :], mask=((i_k + o_k)[:, None] < K) & (o_n[None, :] < N), other=0)
        b_acc += tl.dot(b_x, b_w.to(b_x.dtype))
    b_s = tl.load(s + o_n, mask=o_n < N, other=0.0)
    tl.store(y + o_m[:, None] * N + o_n[None, :], b_acc * b_s[None, :], mask=(o_m[:, None] < M) & (o_n[None, :] < N))


def w8_matmul(x: torch.Tensor, w: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    M, K = x.shape
    N = w.shape[1]
    y = torch.empty(M, N, device=x.device, dtype=torch.float32)
    bm, bn = 16, 128
    w8_matmul_kernel[(triton.cdiv(M, bm), triton.cdiv(N, bn))](x, w, s, y, M, N, K, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=64, num_warps=8)
    return y
