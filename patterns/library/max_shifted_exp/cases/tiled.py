# refuse: inside the loop on line 10: a tiled row needs the running max of online_softmax
import torch
import triton
import triton.language as tl


@triton.jit
def softmax_sum_kernel(x, s, N, BLOCK: tl.constexpr):
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for i in range(0, N, BLOCK):
        o = i + tl.arange(0, BLOCK)
        b_x = tl.load(x + tl.program_id(0) * N + o, mask=o < N, other=-float("inf"))
        b_e = tl.exp(b_x)
        acc += b_e / tl.sum(b_e, 0)
    tl.store(s + tl.program_id(0), tl.sum(acc, 0))
