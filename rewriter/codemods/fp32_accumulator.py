"""Accumulate in fp32: `tl.zeros(shape, dtype=tl.float16)` -> `tl.zeros(shape, dtype=tl.float32)`.

Every accumulator of the target kernel that a loop adds into and that was made by
tl.zeros / tl.full in a low-precision dtype (tl.float16, tl.bfloat16, fp8, or
the input's `x.dtype.element_ty`) is made in tl.float32 instead, and every
`tl.dot(..., out_dtype=<low>)` in a loop drops out_dtype (fp32 is tl.dot's
default for floating operands). tl.store converts the fp32 result to the
output's element type, so the launcher and the output dtype do not change.

Refuses: a kernel with no low-precision accumulator; a file that does not
import triton.language.
"""
from __future__ import annotations

import libcst as cst
import libcst.matchers as m

from patterns.core.predicates import _LOW_FLOAT, _matches_any
from patterns.rewriter.edits import PlannedCodemod, code


class Fp32Accumulator(PlannedCodemod):
    PATTERN = "fp32_accumulator"
    DESCRIPTION = "low-precision accumulators made in fp32"

    def plan(self, module: cst.Module) -> None:
        k = self.kernel
        tl = next((alias for alias, full in self.facts.imports.items() if full == "triton.language"), None)
        if tl is None:
            self.refuse("the file does not import triton.language")
        in_loops = {v for lp in k.loops for v in lp.assigned}
        accumulated = {v for v in in_loops if v in k.accumulates or v in k.assigns}
        for call in m.findall(self.fn.body, m.Call(func=m.Attribute(value=m.Name(tl), attr=m.Name("zeros") | m.Name("full")))):
            dtype = next((a for a in call.args if a.keyword and a.keyword.value == "dtype"), None)
            positional = [a for a in call.args if a.keyword is None]
            if dtype is None and len(positional) >= (3 if call.func.attr.value == "full" else 2):  # type: ignore[attr-defined]
                dtype = positional[-1]
            if dtype is None or not _matches_any(code(dtype.value), _LOW_FLOAT):
                continue
            if not self._assigned_in_loop(call, accumulated):
                continue
            self.replace(dtype.value, lambda u: cst.Attribute(cst.Name(tl), cst.Name("float32")))
        for loop in m.findall(self.fn.body, m.For() | m.While()):
            for call in m.findall(loop, m.Call(func=m.Attribute(value=m.Name(tl), attr=m.Name("dot")))):
                out = next((a for a in call.args if a.keyword and a.keyword.value == "out_dtype"), None)
                if out is not None and _matches_any(code(out.value), _LOW_FLOAT):
                    self.replace(call, lambda u: _without(u, "out_dtype"))
        if not self._edits:
            self.refuse(f"{k.name}: no accumulator in fp16/bf16/fp8 or the input dtype")

    def _assigned_in_loop(self, call: cst.Call, accumulated: set[str]) -> bool:
        """The statement `name = tl.zeros(...)` names a variable a loop accumulates into."""
        for stmt in m.findall(self.fn.body, m.SimpleStatementLine()):
            for small in stmt.body:  # type: ignore[attr-defined]
                if isinstance(small, (cst.Assign, cst.AnnAssign)) and small.value is call:
                    targets = [t.target for t in small.targets] if isinstance(small, cst.Assign) else [small.target]
                    return any(isinstance(t, cst.Name) and t.value in accumulated for t in targets)
        return False


def _without(call: cst.Call, name: str) -> cst.Call:
    args = [a for a in call.args if not (a.keyword and a.keyword.value == name)]
    if args:
        args[-1] = args[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
    return call.with_changes(args=args)
