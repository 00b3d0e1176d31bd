"""Unroll loops with compile-time bounds: `for i in range(W)` -> `for i in tl.static_range(W)`.

Every `range` loop of the target kernel whose bounds are literals or tl.constexpr
parameters (a literal trip count at most the param `max_trip`, default 16) is
iterated with tl.static_range: Triton unrolls it, so the loop index is a constant
in each copy (offsets fold, `if i == 0:` branches vanish) and the loads of all
iterations can be issued before the first is used. The arithmetic is the same,
in the same order.

Refuses: a kernel with no such loop (bounds that are runtime values cannot be
unrolled), a literal trip count above max_trip (unrolling a long loop grows the
code and compile time for nothing), a file that does not import triton.language.
"""
from __future__ import annotations

import libcst as cst
import libcst.matchers as m

from patterns.core.predicates import Subject, short_constant_loop
from patterns.rewriter.edits import PlannedCodemod


class StaticRangeUnroll(PlannedCodemod):
    PATTERN = "static_range_unroll"
    DESCRIPTION = "loops with compile-time bounds unrolled with tl.static_range"

    def plan(self, module: cst.Module) -> None:
        k = self.kernel
        tl = next((alias for alias, full in self.facts.imports.items() if full == "triton.language"), None)
        verdict = short_constant_loop(Subject(self.facts, k), max_trip=self.params["max_trip"])
        if not verdict.ok:
            self.refuse(f"{k.name}: {verdict.reasons[0]}: their trip count is only known at run time")
        if tl is None:
            self.refuse("the file does not import triton.language: no tl.static_range to iterate with")
        lines = set(verdict.lines)
        for loop in m.findall(self.fn.body, m.For(iter=m.Call(func=m.Name("range")))):
            if self.line(loop) in lines:
                self.replace(loop.iter.func, lambda u: cst.Attribute(cst.Name(tl), cst.Name("static_range")))  # type: ignore[attr-defined]
        if not self._edits:
            self.refuse(f"{k.name}: the loops with compile-time bounds are not plain `for … in range(…)`")
