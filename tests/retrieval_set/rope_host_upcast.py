"""Rotary embedding of bf16 queries computed in fp32: the launcher upcasts the
input with .float() before the kernel reads it."""
import torch
import triton
import triton.language as tl


@triton.jit
def rope_kernel(x, cos, sin, y, H, D2, BD2: tl.constexpr):
    i_t, i_h = tl.program_id(0).to(tl.int64), tl.program_id(1)
    o = tl.arange(0, BD2)
    m = o < D2
    base = (i_t * H + i_h) * 2 * D2
    x1 = tl.load(x + base + o, mask=m, other=0.0)
    x2 = tl.load(x + base + D2 + o, mask=m, other=0.0)
    c = tl.load(cos + i_t * D2 + o, mask=m, other=0.0)
    s = tl.load(sin + i_t * D2 + o, mask=m, other=0.0)
    tl.store(y + base + o, x1 * c - x2 * s, mask=m)
    tl.store(y + base + D2 + o, x2 * c + x1 * s, mask=m)


def rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    T, H, D = x.shape
    xf = x.float()
    y = torch.empty_like(xf)
    rope_kernel[(T, H)](xf, cos, sin, y, H, D // 2, BD2=triton.next_power_of_2(D // 2), num_warps=1)
    return y
