"""Cast a kernel's program ids to int64, so the addresses they scale cannot wrap at 2^31 elements.

Every `tl.program_id(a)` of the kernel that is not cast already becomes
`tl.program_id(a).to(tl.int64)`, where it is read (FLA's form: `i_b, i_h =
tl.program_id(0).to(tl.int64), ...`); the index arithmetic computed from it
is int64 from there on, and nothing else changes. For every input on which
the kernel was correct, it computes the same values.

Refuses a kernel whose program ids are read by a @triton.jit helper: the
rewrite edits the kernel alone.
"""
from __future__ import annotations

import libcst as cst
import libcst.matchers as m

from patterns.rewriter.edits import PlannedCodemod, expr


class Int64Offsets(PlannedCodemod):
    PATTERN = "int64_offsets"
    DESCRIPTION = "program ids cast to int64 before they scale a runtime stride"

    def plan(self, module: cst.Module) -> None:
        k = self.kernel
        tl = next((alias for alias, full in self.facts.imports.items() if full == "triton.language"), "tl")
        if any(c.via for c in k.calls_named("tl.program_id")):
            self.refuse(f"a @triton.jit helper of {k.name} reads tl.program_id: cast it there (the rewrite edits the kernel only)")
        pid = m.Call(func=m.Attribute(value=m.Name(tl), attr=m.Name("program_id")))
        cast = {id(c.func.value) for c in m.findall(self.fn.body, m.Call(func=m.Attribute(value=pid, attr=m.Name("to"))))}  # type: ignore[attr-defined]
        wide = expr(f"{tl}.int64")
        for call in m.findall(self.fn.body, pid):
            if id(call) not in cast:
                self.replace(call, lambda u: cst.Call(func=cst.Attribute(value=u, attr=cst.Name("to")), args=[cst.Arg(wide)]))
