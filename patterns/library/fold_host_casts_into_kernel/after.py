"""The write strength of a delta-rule layer: beta = sigmoid(raw), in fp32.

raw comes from a half-precision projection. The kernel loads it in its own
dtype and converts in registers: 2 bytes read and 4 written per element, and
no separate cast kernel.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def beta_sigmoid_kernel(x, y, n, BLOCK: tl.constexpr):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = o < n
    b_x = tl.load(x + o, mask=m, other=0.0).to(tl.float32)
    tl.store(y + o, tl.sigmoid(b_x), mask=m)


def beta_sigmoid(raw: torch.Tensor) -> torch.Tensor:
    y = torch.empty(raw.shape, device=raw.device, dtype=torch.float32)
    n = raw.numel()
    beta_sigmoid_kernel[(triton.cdiv(n, 256),)](raw, y, n, BLOCK=256)
    return y
