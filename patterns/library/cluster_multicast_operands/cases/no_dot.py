# refuse: add_kernel has no tl.dot loop: no operand tile for a cluster to share
import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x, y, z, N, BLOCK: tl.constexpr):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(z + o, tl.load(x + o, mask=o < N) + tl.load(y + o, mask=o < N), mask=o < N)


def add(x, y):
    z = torch.empty_like(x)
    add_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, z, x.numel(), BLOCK=1024)
    return z
