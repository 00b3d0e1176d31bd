# refuse: no range loop with compile-time bounds
import torch
import triton
import triton.language as tl


@triton.jit
def row_sum_kernel(x, y, N, BLOCK: tl.constexpr):
    o = tl.arange(0, BLOCK)
    b_s = tl.zeros([BLOCK], dtype=tl.float32)
    for i in range(0, N, BLOCK):
        b_s += tl.load(x + tl.program_id(0) * N + i + o, mask=i + o < N, other=0.0)
    tl.store(y + tl.program_id(0), tl.sum(b_s, 0))
