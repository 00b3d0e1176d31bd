"""Launch a GEMM's programs as clusters: `kernel[grid](..., num_ctas=2)`.

On sm_90+ Triton then splits each program over a cluster of num_ctas CTAs on
neighbouring SMs, whose shared operand tiles TMA can multicast. The arithmetic
per output element is unchanged (exact); the speed must be measured, and the
PTX checked for .multicast::cluster.

Refuses: an autotuned kernel (num_ctas belongs in each triton.Config); a
kernel with no launch in the file; a kernel without a tl.dot loop (no operand
tile for neighbours to share).
"""
from __future__ import annotations

import libcst as cst

from patterns.rewriter.edits import PlannedCodemod, set_launch_option


class ClusterMulticastOperands(PlannedCodemod):
    PATTERN = "cluster_multicast_operands"
    DESCRIPTION = "launches as clusters of num_ctas CTAs"

    def plan(self, module: cst.Module) -> None:
        k = self.kernel
        if not any(c.name in ("tl.dot", "tl.dot_scaled") and c.loops for c in k.calls):
            self.refuse(f"{k.name} has no tl.dot loop: no operand tile for a cluster to share")
        set_launch_option(self, module, "num_ctas", str(self.params["num_ctas"]))
