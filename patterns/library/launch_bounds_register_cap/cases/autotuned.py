# refuse: scale_kernel is autotuned: set maxnreg in each triton.Config
import torch
import triton
import triton.language as tl


@triton.autotune(configs=[triton.Config({"BLOCK": 256}, num_warps=4), triton.Config({"BLOCK": 1024}, num_warps=8)], key=["N"])
@triton.jit
def scale_kernel(x, y, N, BLOCK: tl.constexpr):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    for i in range(0, 4):
        tl.store(y + o, tl.load(x + o, mask=o < N) * 2, mask=o < N)


def scale(x):
    y = torch.empty_like(x)
    scale_kernel[lambda meta: (triton.cdiv(x.numel(), meta["BLOCK"]),)](x, y, x.numel())
    return y
