# refuse: no constexpr used only as a bound
import torch
import triton
import triton.language as tl


@triton.jit
def copy_kernel(x, y, D: tl.constexpr):
    o = tl.arange(0, D)
    tl.store(y + tl.program_id(0) * D + o, tl.load(x + tl.program_id(0) * D + o))
