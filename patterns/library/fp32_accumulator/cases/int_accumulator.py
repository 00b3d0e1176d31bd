# refuse: no accumulator in fp16/bf16/fp8 or the input dtype
import torch
import triton
import triton.language as tl


@triton.jit
def dot_kernel(a, b, c, K, BK: tl.constexpr):
    o = tl.arange(0, BK)
    acc = tl.zeros([BK], dtype=tl.int32)
    for i in range(0, K, BK):
        acc += tl.load(a + i + o, mask=i + o < K, other=0.0) * 1
    tl.store(c, tl.sum(acc, 0))
