"""End a causal attention kernel's key loop at the diagonal tile.

`for i_n in range(0, T, BN)` whose body masks `o_m[:, None] >= o_n[None, :]`
(o_m = i_m * BM + tl.arange(0, BM) the query tile, o_n from i_n) becomes
`range(0, tl.minimum((i_m + 1) * BM, T), BN)`. The mask stays: the diagonal
tile still needs it. Tiles past the diagonal are masked for every row, and in
an online softmax such a tile is the identity (rescale by exp(0), add 0), so
the output is bit-identical.

Refuses: no causal mask in a tl.dot loop; a key loop that does not start at 0
or step by its own tile (`range(0, T, BN)`); a query offset that is not
`<pid index> * BLOCK + tl.arange(0, BLOCK)`.
"""
from __future__ import annotations

import re

import libcst as cst
import libcst.matchers as m

from patterns.rewriter.edits import PlannedCodemod, code, expr

_CAUSAL = re.compile(r"(\w+)\s*\[\s*:\s*,\s*None\s*\]\s*>=\s*(\w+)\s*\[\s*None\s*,\s*:\s*\]")


class CausalTileSkipping(PlannedCodemod):
    PATTERN = "causal_tile_skipping"
    DESCRIPTION = "causal key loop bounded by the query tile"

    def plan(self, module: cst.Module) -> None:
        k = self.kernel
        dot_loops = [lp for lp in k.loops if any(lp.line in c.loops and c.name == "tl.dot" for c in k.calls)]
        found = None
        for lp in dot_loops:
            texts = [a for c in k.calls if lp.line in c.loops and c.name == "tl.where" for a in c.args[:1]]
            texts += [e for v, (line, e) in k.assigns.items() if lp.line <= line <= lp.end_line]
            for text in texts:
                mo = _CAUSAL.search(text)
                if mo and k.pid_deps.get(mo.group(1)) and mo.group(1) not in lp.assigned and mo.group(2) in lp.assigned:
                    found = (lp, mo.group(1))
                    break
            if found:
                break
        if found is None:
            self.refuse(f"{k.name}: no causal mask `o_m[:, None] >= o_n[None, :]` in a tl.dot loop")
        lp, row = found
        if len(lp.args) != 3 or lp.args[0].strip() != "0":
            self.refuse(f"the key loop on line {lp.line} (`{lp.iter}`) does not start at 0 and step by a tile: "
                        "the diagonal bound would skip keys it needs")
        mo = re.fullmatch(r"\s*(\w+)\s*\*\s*(\w+)\s*\+\s*tl\.arange\(\s*0\s*,\s*(\w+)\s*\)\s*", k.assigns.get(row, (0, ""))[1])
        if not mo or mo.group(2) != mo.group(3) or not k.pid_deps.get(mo.group(1)):
            self.refuse(f"the query offset {row} is not `<program index> * BLOCK + tl.arange(0, BLOCK)`")
        tile, block = mo.group(1), mo.group(2)
        loop = next(f for f in m.findall(self.fn.body, m.For()) if self.line(f) == lp.line)
        call = loop.iter  # type: ignore[attr-defined]
        end = code(call.args[1].value)
        bound = expr(f"tl.minimum(({tile} + 1) * {block}, {end})")
        self.replace(call.args[1], lambda u: u.with_changes(value=bound))
        note = cst.EmptyLine(comment=cst.Comment("# tiles past the query tile's last row are masked for every row: stop at the diagonal"))
        self.replace(loop, lambda u: u.with_changes(leading_lines=[*u.leading_lines, note]))
