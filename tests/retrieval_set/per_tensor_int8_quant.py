"""Dynamic per-tensor int8 quantization: block maxima combined with an atomic max, then a second kernel casts with the one scale."""
import torch
import triton
import triton.language as tl


@triton.jit
def amax_kernel(x_ptr, scale_ptr, numel, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < numel, other=0.0).to(tl.float32)
    tl.atomic_max(scale_ptr, tl.max(tl.abs(x), 0) / 127.0)


@triton.jit
def quantize_kernel(x_ptr, y_ptr, scale_ptr, numel, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < numel
    scale = tl.load(scale_ptr)
    v = tl.clamp(tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32) / scale, -127.0, 127.0)
    tl.store(y_ptr + offs, tl.where(v >= 0, v + 0.5, v - 0.5).to(tl.int8), mask=mask)


def quantize_per_tensor(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    scale = torch.zeros(1, dtype=torch.float32, device=x.device)
    grid = (triton.cdiv(x.numel(), 1024),)
    amax_kernel[grid](x, scale, x.numel(), BLOCK=1024)
    y = torch.empty(x.shape, dtype=torch.int8, device=x.device)
    quantize_kernel[grid](x, y, scale, x.numel(), BLOCK=1024)
    return y, scale
