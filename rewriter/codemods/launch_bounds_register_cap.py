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


class LaunchBoundsRegisterCap(PlannedCodemod):
    PATTERN = "launch_bounds_register_cap"
    DESCRIPTION = "launches with maxnreg"

    def plan(self, module: cst.Module) -> None:
        set_launch_option(self, module, "maxnreg", str(self.params["maxnreg"]))
