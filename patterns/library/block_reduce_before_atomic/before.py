"""Sum of squared errors over a whole tensor into one scalar: loss = sum((x - y)²).

Every lane of every program adds its own term to the same address with an
atomic: BLOCK atomics per program, all serialised on one memory location.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def sse_fwd_kernel(x, y, loss, n, BLOCK: tl.constexpr):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = o < n
    b_d = tl.load(x + o, mask=m, other=0.0).to(tl.float32) - tl.load(y + o, mask=m, other=0.0).to(tl.float32)
    tl.atomic_add(loss + o * 0, b_d * b_d, mask=m)


def sse(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    loss = torch.zeros(1, device=x.device, dtype=torch.float32)
    n = x.numel()
    sse_fwd_kernel[(triton.cdiv(n, 128),)](x, y, loss, n, BLOCK=128)
    return loss
