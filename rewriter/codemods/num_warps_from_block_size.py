"""Size a launch's num_warps from the block it passes: `num_warps = min(max(BLOCK // 256, 1), W)`.

A row kernel whose block is the row width rounded to a power of two
(`BLOCK = triton.next_power_of_2(D)`, possibly capped with min) and whose launch
passes no num_warps runs at Triton's default of 4 warps whatever the width. The
rewrite inserts the rule upstream launchers use (SGLang's per-token-group quant
and gated layernorm: 256 elements per warp, at least 1) right above the launch
and passes `num_warps=num_warps`. W is the param `max_warps` (default 16;
SGLang caps at 8, Liger at 32). The kernel and its results are unchanged.

Refuses: an autotuned kernel (num_warps belongs in its configs); a launch that
already passes num_warps; a launch whose block is a literal or not a power of two
made on the host (the author chose the tile and its warps).
"""
from __future__ import annotations

import re

import libcst as cst

from patterns.rewriter.edits import code, find_launch, insert_args, kwarg, stmts, PlannedCodemod

POW2 = re.compile(r"next_power_of_2\(")


class NumWarpsFromBlockSize(PlannedCodemod):
    PATTERN = "num_warps_from_block_size"
    DESCRIPTION = "num_warps sized from the power-of-two block the launch passes"

    def plan(self, module: cst.Module) -> None:
        k = self.kernel
        if k.autotune is not None:
            self.refuse(f"{k.name} is autotuned: set num_warps in its configs")
        if not k.launches:
            self.refuse(f"no launch of {k.name} in this file")
        params = [p.name for p in k.params]
        blocks = [p.name for p in k.params if p.constexpr]
        cap = self.params["max_warps"]
        planned = False
        for launch in k.launches:
            la = find_launch(self, module, launch.line, params)
            if "num_warps" in la.options:
                self.refuse(f"the launch on line {launch.line} already passes num_warps")
            chosen = None
            for b in blocks:
                node = la.value(b)
                if node is None:
                    continue
                text = code(node)
                source = text
                if isinstance(node, cst.Name) and len(la.assigns.get(text, [])) == 1:
                    source = code(la.assigns[text][0][1])
                if POW2.search(source):
                    chosen = (b, text)
                    break
                if la.literal(node) is not None:
                    self.refuse(f"{b}={text} is a literal: the author chose the tile and its warps")
            if chosen is None:
                self.refuse(f"the launch on line {launch.line} passes no block made by triton.next_power_of_2")
            b, text = chosen
            if isinstance(la.value(b), cst.Name):
                size = text
                new = stmts(f"# 256 elements per warp: the default 4 warps would hold {b}/128 values a thread\n"
                            f"num_warps = min(max({size} // 256, 1), {cap})\n")
            else:  # an inline block expression: name it first
                size = b
                new = stmts(f"{b} = {text}\n# 256 elements per warp: the default 4 warps would hold {b}/128 values a thread\n"
                            f"num_warps = min(max({b} // 256, 1), {cap})\n")
                self.replace(la.by_param[b], lambda u, b=b: u.with_changes(value=cst.Name(b)))
            if "num_warps" in la.assigns:
                self.refuse(f"{la.host.name.value} already assigns num_warps")
            self.insert_before(la.stmt, new)
            self.replace(la.call, lambda u: insert_args(u, [(len(u.args), kwarg("num_warps", "num_warps"))]))
            self.keep_width(la.stmt)
            planned = True
        if not planned:
            self.refuse("nothing to size")
