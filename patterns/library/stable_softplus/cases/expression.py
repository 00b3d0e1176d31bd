# refuse: the softplus on line 11 exponentiates an expression \(`v \+ tl.load\(b\)`\): assign it to a name first
import torch
import triton
import triton.language as tl


@triton.jit
def sp_kernel(x, b, y, n, BLOCK: tl.constexpr):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(x + o, mask=o < n, other=0.0)
    tl.store(y + o, tl.log(1 + tl.exp(v + tl.load(b))), mask=o < n)
