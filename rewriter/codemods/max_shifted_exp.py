"""Shift softmax exponents by the row max: `e = tl.exp(x)` -> `m = tl.max(x, 0)`; `e = tl.exp(x - m)`.

For each statement `e = tl.exp(x)` (or tl.exp2) of the target kernel, outside
loops, whose result is divided by (or logged through) its own tl.sum over axis
0 and whose argument x is a variable loaded by the kernel, the rewrite inserts
`<m> = tl.max(x, 0)` right above it and exponentiates `x - <m>`. The softmax is
unchanged mathematically (a common shift cancels in e / sum(e)); every
exponent becomes <= 0, so nothing overflows. <m> is `b_m` when the kernel's
names start with `b_`, else `x_max`, made unique.

Refuses: an exp inside a loop (a row tiled over several blocks needs the
running max of online_softmax); an exponent that is an expression rather than
a variable (name it first); a 2-D tile (the max would need [:, None] along the
reduced axis); a kernel with no unshifted exp normalised by its sum.
"""
from __future__ import annotations

import re

import libcst as cst
import libcst.matchers as m

from patterns.core.predicates import _normalised_by_sum, _reduce_axis, _shift_of
from patterns.rewriter.edits import PlannedCodemod, code, stmts


class MaxShiftedExp(PlannedCodemod):
    PATTERN = "max_shifted_exp"
    DESCRIPTION = "softmax exponents shifted by the row max"

    def plan(self, module: cst.Module) -> None:
        k = self.kernel
        loaded = set(k.loaded)
        sites = [c for c in k.calls if c.name in ("tl.exp", "tl.exp2") and c.args and not c.via
                 and not _shift_of(k, c.args[0]) and _normalised_by_sum(k, c.line)]
        if not sites:
            self.refuse(f"{k.name} has no unshifted exp normalised by its own sum")
        names = set(k.assigns) | {p.name for p in k.params}
        for c in sites:
            if c.loops:
                self.refuse(f"the exp on line {c.line} is inside the loop on line {c.loops[-1]}: "
                            "a tiled row needs the running max of online_softmax")
            x = c.args[0].strip()
            if not re.fullmatch(r"[A-Za-z_]\w*", x) or x not in loaded:
                self.refuse(f"the exponent on line {c.line} (`{x}`) is not a loaded variable: assign it to a name first")
            made = {v for v, (ln, _) in k.assigns.items() if ln == c.line}
            if any(s.name == "tl.sum" and s.args and s.args[0].strip() in made and _reduce_axis(s) not in ("0", "None")
                   for s in k.calls):
                self.refuse(f"the sum of the exp on line {c.line} is not over axis 0: a 2-D tile, shift it by hand with [:, None]")
            base = "b_m" if x.startswith("b_") else f"{x}_max"
            name, i = base, 1
            while name in names:
                i += 1
                name = f"{base}{i}"
            names.add(name)
            self._shift(c.line, x, name)
        if not self._edits:
            self.refuse("nothing to shift")

    def _shift(self, line: int, x: str, name: str) -> None:
        for stmt in m.findall(self.fn.body, m.SimpleStatementLine()):
            if self.line(stmt) != line:
                continue
            for call in m.findall(stmt, m.Call(func=m.Attribute(value=m.Name("tl"), attr=m.Name("exp") | m.Name("exp2")))):
                arg = call.args[0]  # type: ignore[attr-defined]
                if code(arg.value) != x:
                    continue
                new = cst.BinaryOperation(cst.Name(x), cst.Subtract(), cst.Name(name))
                self.replace(arg, lambda u, n=new: u.with_changes(value=n))
                self.insert_before(stmt, stmts(f"{name} = tl.max({x}, 0)\n"))
                return
        self.refuse(f"the exp on line {line} is not a plain statement of the kernel body")


