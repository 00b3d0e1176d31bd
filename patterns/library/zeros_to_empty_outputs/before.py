"""SwiGLU activation: y = silu(gate) * up, elementwise over [T, D].

The kernel writes every element of y. When y is allocated with torch.zeros,
the zeros are a kernel of their own that writes the whole buffer once more
before the activation overwrites it.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def swiglu_fwd_kernel(g, u, y, n, BLOCK: tl.constexpr):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = o < n
    b_g = tl.load(g + o, mask=m, other=0.0).to(tl.float32)
    b_u = tl.load(u + o, mask=m, other=0.0).to(tl.float32)
    b_y = b_g * tl.sigmoid(b_g) * b_u
    tl.store(y + o, b_y.to(y.dtype.element_ty), mask=m)


def swiglu(g: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    y = torch.zeros_like(g)
    n = g.numel()
    swiglu_fwd_kernel[(triton.cdiv(n, 256),)](g, u, y, n, BLOCK=256)
    return y
