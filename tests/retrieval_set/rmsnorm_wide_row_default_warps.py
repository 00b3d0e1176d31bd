"""Fused RMSNorm as published kernels often write it: the whole hidden state in
one block whatever its width, launched at Triton's default warps."""
import torch
import triton
import triton.language as tl


@triton.jit
def rmsnorm_kernel(X, W, Y, stride, N, eps, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < N
    x = tl.load(X + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
    rstd = tl.rsqrt(tl.sum(x * x, axis=0) / N + eps)
    w = tl.load(W + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(Y + row * stride + cols, (x * rstd * w).to(Y.dtype.element_ty), mask=mask)


def rmsnorm(x: torch.Tensor, w: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    M, N = x.shape
    y = torch.empty_like(x)
    rmsnorm_kernel[(M,)](x, w, y, x.stride(0), N, eps, BLOCK_SIZE=triton.next_power_of_2(N))
    return y
