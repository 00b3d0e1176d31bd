"""A user's per-channel scale of x [H, N, D] (written for the tests, not one of kernels/), laid out the way
Liger-Kernel 0.8.5's rope_forward lays out q and k (liger_kernel/ops/rope.py, rope_forward): the kernel
works on x.transpose(0, 1).contiguous() and returns the transpose back. That copy is a no-op where the
transpose already is contiguous (H == 1 or N == 1): the kernel then writes x's own memory and returns a
view of it, else it writes a copy and x is left alone."""
import torch
import triton
import triton.language as tl


@triton.jit
def scale_kernel(x, w, row_stride, D, BD: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    o = tl.arange(0, BD)
    b_x = tl.load(x + row * row_stride + o, mask=o < D, other=0.).to(tl.float32)
    b_w = tl.load(w + o, mask=o < D, other=0.).to(tl.float32)
    tl.store(x + row * row_stride + o, (b_x * b_w).to(x.dtype.element_ty), mask=o < D)


def scale_heads(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    H, N, D = x.shape
    y = x.transpose(0, 1).contiguous()  # [N, H, D]; x itself where H == 1 or N == 1
    scale_kernel[(N * H,)](y, weight, D, D, BD=triton.next_power_of_2(D), num_warps=1)
    out = y.transpose(0, 1)
    return out
