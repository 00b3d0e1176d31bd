"""Scale an activation by a learned scalar gate: y = x * sigmoid(alpha).

alpha is a one-element device tensor (a parameter, or a value another kernel
computed). Read back with .item() to pass a Python float, it makes the host
wait for the GPU on every call, and a CUDA graph would freeze the value seen
at capture; passed as a pointer, the kernel loads it.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def gate_scale_kernel(x, y, alpha, n, BLOCK: tl.constexpr):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = o < n
    b_x = tl.load(x + o, mask=m, other=0.0).to(tl.float32)
    tl.store(y + o, b_x * tl.sigmoid(alpha), mask=m)


def gate_scale(x: torch.Tensor, alpha: torch.Tensor) -> torch.Tensor:
    y = torch.empty_like(x)
    n = x.numel()
    gate_scale_kernel[(triton.cdiv(n, 256),)](x, y, alpha.item(), n, BLOCK=256)
    return y
