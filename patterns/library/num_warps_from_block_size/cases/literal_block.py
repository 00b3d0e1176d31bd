# refuse: BLOCK=1024 is a literal: the author chose the tile
import torch
import triton
import triton.language as tl


@triton.jit
def scale_kernel(x, y, s, N, BLOCK: tl.constexpr):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y + o, tl.load(x + o, mask=o < N) * s, mask=o < N)


def scale(x, s):
    y = torch.empty_like(x)
    scale_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, s, x.numel(), BLOCK=1024)
    return y
