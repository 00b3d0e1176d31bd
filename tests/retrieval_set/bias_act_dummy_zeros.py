"""Bias + SiLU epilogue with an optional bias: absent biases become a zero vector."""
import torch
import triton
import triton.language as tl


@triton.jit
def bias_silu_kernel(x, bias, y, N, n_elements, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    v = tl.load(x + offs, mask=mask, other=0.0).to(tl.float32)
    v += tl.load(bias + offs % N, mask=mask, other=0.0).to(tl.float32)
    tl.store(y + offs, v * tl.sigmoid(v), mask=mask)


def bias_silu(x: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    N = x.shape[-1]
    b = bias if bias is not None else torch.zeros(N, device=x.device, dtype=x.dtype)
    y = torch.empty_like(x)
    n = x.numel()
    bias_silu_kernel[(triton.cdiv(n, 1024),)](x, b, y, N, n, BLOCK=1024)
    return y
