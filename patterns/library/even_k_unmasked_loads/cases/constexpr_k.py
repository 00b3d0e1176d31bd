# refuse: no loop over a runtime length in steps of a constexpr block with masked loads
import torch
import triton
import triton.language as tl


@triton.jit
def rowsum_kernel(x, y, K: tl.constexpr, BK: tl.constexpr):
    acc = tl.zeros([BK], dtype=tl.float32)
    for i_k in range(0, K, BK):
        o_k = i_k + tl.arange(0, BK)
        acc += tl.load(x + tl.program_id(0) * K + o_k, mask=o_k < K, other=0.0)
    tl.store(y + tl.program_id(0), tl.sum(acc, 0))
