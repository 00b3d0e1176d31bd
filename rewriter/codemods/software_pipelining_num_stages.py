"""Software-pipeline a kernel's load loop: `range(a, b, c)` -> `tl.range(a, b, c, num_stages=S)`.

Kernel (where=loop, the default): every innermost `range`/`tl.range` loop that
loads from memory in its own body (the K loop of a GEMM, the KV loop of an
attention) is iterated with tl.range(..., num_stages=S), so S - 1 tiles are in
flight while the current one is used; loops without loads keep the launch's
setting. Launcher (where=launch): num_stages=S is passed at the launch (or an
existing num_stages replaced), which pipelines every loop of the kernel. S is
the param `num_stages` (default 3). Loads, math and results are unchanged: the
pipeliner only reorders when loads are issued.

Refuses: a loop whose trip count is read from memory (a sequence length loaded
per program: short, data-dependent loops gain nothing and pay the prologue); a
kernel whose only load loops are unrolled (tl.static_range) or `while` loops;
where=launch on an autotuned kernel (num_stages belongs in its configs).
Note: S is not checked against shared memory; a too-deep S fails to compile
(OutOfResources) on the GPU, and validation sees it.
"""
from __future__ import annotations

import libcst as cst
import libcst.matchers as m

from patterns.rewriter.edits import PlannedCodemod, code, find_launch, insert_args, kwarg


class SoftwarePipeliningNumStages(PlannedCodemod):
    PATTERN = "software_pipelining_num_stages"
    DESCRIPTION = "load loops iterated with tl.range(..., num_stages=S)"

    def plan(self, module: cst.Module) -> None:
        k = self.kernel
        stages = self.params["num_stages"]
        tl = next((alias for alias, full in self.facts.imports.items() if full == "triton.language"), None)
        loading = {}  # loop line -> LoopFacts, for loops that load in their own body
        by_line = {lp.line: lp for lp in k.loops}
        for c in k.calls:
            if c.name == "tl.load" and not c.via and c.loops:
                loading[c.loops[-1]] = by_line[c.loops[-1]]
        if not loading:
            self.refuse(f"{k.name} has no loop that loads from memory")
        # innermost: a loading loop with another loading loop inside it is left to its inner one
        inner = [lp for lp in loading.values() if not any(o.line != lp.line and lp.line < o.line <= lp.end_line for o in loading.values())]
        candidates = [lp for lp in inner if lp.kind in ("range", "tl.range") and "num_stages" not in lp.kwargs]
        if not candidates:
            lp = inner[0]
            what = "tl.static_range: unrolled, nothing to pipeline" if lp.kind == "tl.static_range" else f"a `{lp.kind}` loop, not a range"
            self.refuse(f"the only loop that loads (line {lp.line}) is {what}")
        loaded = set(k.loaded)
        for lp in candidates:
            bound = next((c for c in k.calls if c.line == lp.line and c.name in ("range", "tl.range") and not c.via), None)
            deps = sorted(set(bound.depends_on) & loaded) if bound else []
            if deps or "tl.load" in lp.iter:
                self.refuse(f"the trip count of the loop on line {lp.line} (`{lp.iter}`) is read from memory ({', '.join(deps) or 'tl.load'}): "
                            "a short data-dependent loop gains nothing from pipelining and pays its prologue")
        if self.params["where"] == "launch":
            if k.autotune is not None:
                self.refuse(f"{k.name} is autotuned: set num_stages in its configs")
            if not k.launches:
                self.refuse(f"no launch of {k.name} in this file to pass num_stages")
            params = [p.name for p in k.params]
            for launch in k.launches:
                la = find_launch(self, module, launch.line, params)
                old = la.options.get("num_stages")
                if old is not None:
                    self.replace(old, lambda u: u.with_changes(value=cst.Integer(str(stages))))
                else:
                    self.replace(la.call, lambda u: insert_args(u, [(len(u.args), kwarg("num_stages", str(stages)))]))
                    self.keep_width(la.stmt)
            return
        if tl is None:
            self.refuse("the file does not import triton.language: no tl.range to iterate with")
        lines = {lp.line for lp in candidates}
        for loop in m.findall(self.fn.body, m.For()):
            if self.line(loop) in lines:
                self.replace(loop.iter, lambda u: _pipelined(u, tl, stages))  # type: ignore[attr-defined]


def _pipelined(call: cst.Call, tl: str, stages: int) -> cst.Call:
    if code(call.func) == "range":
        call = call.with_changes(func=cst.Attribute(cst.Name(tl), cst.Name("range")))
    args = list(call.args)
    last = args[-1]
    args[-1] = last.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
    args.append(kwarg("num_stages", str(stages)).with_changes(comma=last.comma))
    return call.with_changes(args=args)
