"""Cap the registers per thread of a kernel's launches: `kernel[grid](..., maxnreg=R)`.

Every launch of the target kernel in the file gets `maxnreg=R` (the param
`maxnreg`, default 128: with 4 warps, four programs per SM instead of three at
136-168 registers). Register allocation does not change the arithmetic, so
results are bit-identical; whether it is faster depends on the spills it
causes, which only the GPU measurement shows.

Refuses: an autotuned kernel (maxnreg belongs in each triton.Config); a kernel
with no launch in the file; a launch that passes **kwargs (the option may
already be in them).
"""
from __future__ import annotations

import libcst as cst

from patterns.rewriter.edits import PlannedCodemod, set_launch_option

_AUTOTUNED = '''
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
'''


class LaunchBoundsRegisterCap(PlannedCodemod):
    PATTERN = "launch_bounds_register_cap"
    DESCRIPTION = "launches with maxnreg"
    REFUSES = [
        (_AUTOTUNED, r"scale_kernel is autotuned: set maxnreg in each triton.Config"),
        ("def f():\n    return 1\n", "no Triton kernel"),
    ]

    def plan(self, module: cst.Module) -> None:
        set_launch_option(self, module, "maxnreg", str(self.params["maxnreg"]))
