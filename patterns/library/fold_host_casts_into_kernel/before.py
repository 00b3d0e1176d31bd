"""The write strength of a delta-rule layer: beta = sigmoid(raw), in fp32.

raw comes from a half-precision projection. The launcher converts it to fp32
with .float() first: a cast kernel that reads 2 bytes and writes 4 per
element, and the sigmoid kernel then reads those 4 bytes again.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def beta_sigmoid_kernel(x, y, n, BLOCK: tl.constexpr):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = o < n
    b_x = tl.load(x + o, mask=m, other=0.0)
    tl.store(y + o, tl.sigmoid(b_x), mask=m)


def beta_sigmoid(raw: torch.Tensor) -> torch.Tensor:
    x = raw.float()
    y = torch.empty_like(x)
    n = x.numel()
    beta_sigmoid_kernel[(triton.cdiv(n, 256),)](x, y, n, BLOCK=256)
    return y
