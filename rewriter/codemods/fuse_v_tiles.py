"""Fuse the V tiles of a recurrent decode: one program per head covers all of V.

Kernel: the V-tile program axis goes (`i_v = tl.program_id(a)` is dropped, the
higher axes are renumbered) and the tile offset `i_v * BV + tl.arange(0, BV)`
becomes `tl.arange(0, BV)`, so the per-head prologue (norms, gate, beta) runs
once per head instead of once per tile. Launcher: BV = next_power_of_2(V), the
`triton.cdiv(V, BV)` grid axis is dropped, and a generated block (template
launcher.py.j2) guards BV <= max_block and picks num_warps for the larger tile.

Refuses: a V axis that is not its own program_id axis (folded into another
axis) or not a `triton.cdiv(V, BV)` grid axis; an i_v used for anything but the
tile offset; V loads/stores without a mask (the fused tile overhangs V unless V
is a power of two); a BV chosen by the autotuner or a callable grid; a V known
to need BV > max_block.
"""
from __future__ import annotations

import libcst as cst
import libcst.matchers as m

from patterns.core.predicates import PREDICATES, Subject
from patterns.rewriter.edits import PlannedCodemod, code, flat, launcher_assigns, pid_call, render_stmts

BLOCK_NAMES = ("BV", "BLOCK_V", "BLOCK_DV")
# the per-head work every V tile repeats (pattern.yaml applies_when: repeated_per_tile)
PROLOGUE_OPS = ["tl.sum", "tl.sqrt", "tl.rsqrt", "tl.exp", "tl.log", "tl.sigmoid", "softplus"]


def _tile_offset(expr: cst.BaseExpression, block: str) -> str | None:
    """i for `i * BV + tl.arange(0, BV)` (either order)."""
    if not isinstance(expr, cst.BinaryOperation) or not isinstance(expr.operator, cst.Add):
        return None
    arange = m.Call(func=m.Attribute(value=m.Name("tl"), attr=m.Name("arange")), args=[m.Arg(m.Integer("0")), m.Arg(m.Name(block))])
    for prod, other in ((expr.left, expr.right), (expr.right, expr.left)):
        if not m.matches(other, arange) or not isinstance(prod, cst.BinaryOperation) or not isinstance(prod.operator, cst.Multiply):
            continue
        for a, b in ((prod.left, prod.right), (prod.right, prod.left)):
            if m.matches(b, m.Name(block)) and isinstance(a, cst.Name):
                return a.value
    return None


def _int_value(text: str, constants: dict[str, str], local: dict[str, tuple[int, str]]) -> int | None:
    for _ in range(4):
        text = text.strip()
        if text.isdigit():
            return int(text)
        nxt = local.get(text, (0, constants.get(text)))[1]
        if nxt is None:
            return None
        text = nxt
    return None


class FuseVTiles(PlannedCodemod):
    PATTERN = "fuse_v_tiles"
    DESCRIPTION = "one program per head covering all of V instead of one per V tile"

    # -- planning ----------------------------------------------------------------------
    def plan(self, node: cst.Module) -> None:
        k = self.kernel
        blocks = [p.name for p in k.params if p.constexpr and p.name in BLOCK_NAMES]
        if len(blocks) != 1:
            self.refuse(f"{k.name} has {'no' if not blocks else 'several'} V block constexpr ({'/'.join(BLOCK_NAMES)})")
        self.block = blocks[0]
        if k.autotune is not None and any(self.block in cfg or self.block in cfg.get("source", "") for cfg in k.autotune.configs):
            self.refuse(f"{self.block} is chosen by @triton.autotune: fix it to next_power_of_2(V) by hand first")
        if self.block in k.heuristics:
            self.refuse(f"{self.block} is chosen by @triton.heuristics: fix it to next_power_of_2(V) by hand first")
        fn = self.fn
        subject = Subject(self.facts, k)
        repeated = PREDICATES["repeated_per_tile"].func(subject, block_param=list(BLOCK_NAMES), ops=PROLOGUE_OPS)
        if not repeated.ok or not PREDICATES["reduction"].func(subject, ops=["tl.sum"]).ok:
            self.refuse(f"{k.name} recomputes no per-head prologue (norms, gates: tl.sum, tl.exp, ...) in every V tile: "
                        "fusing would only shrink the grid")
        self._plan_kernel(fn)
        if not k.launches:
            self.refuse(f"no launch of {k.name} in this file: the launcher must change with the kernel")
        hosts = {s.name.value: s for s in node.body if isinstance(s, cst.FunctionDef)}
        for la in k.launches:
            if la.function not in hosts:
                self.refuse(f"the launch on line {la.line} is not in a top-level function")
            self._plan_launch(hosts[la.function], la.line)
        self._fn: list[str] = []

    def _plan_kernel(self, fn: cst.FunctionDef) -> None:
        # the tile offset o_v = i_v * BV + tl.arange(0, BV)
        offsets = []
        for stmt in fn.body.body:
            for assign in m.findall(stmt, m.Assign()):
                for t in assign.targets:  # type: ignore[attr-defined]
                    pairs = [(t.target, assign.value)]  # type: ignore[attr-defined]
                    if isinstance(t.target, cst.Tuple) and isinstance(assign.value, cst.Tuple):  # type: ignore[attr-defined]
                        pairs = [(a.value, b.value) for a, b in zip(t.target.elements, assign.value.elements)]  # type: ignore[attr-defined]
                    for tgt, val in pairs:
                        iv = _tile_offset(val, self.block)
                        if iv and isinstance(tgt, cst.Name):
                            offsets.append((tgt.value, iv, val))
        if len(offsets) != 1:
            self.refuse(f"expected one V tile offset `o_v = i_v * {self.block} + tl.arange(0, {self.block})`, found {len(offsets)}")
        self.ov, self.iv, offset = offsets[0]
        self.replace(offset, lambda u: u.right if m.matches(u.left, m.BinaryOperation(operator=m.Multiply())) else u.left)
        # i_v = tl.program_id(a): its own axis
        defs = []
        for stmt in fn.body.body:
            if not m.matches(stmt, m.SimpleStatementLine(body=[m.Assign()])):
                continue
            assign = stmt.body[0]
            tgt, val = assign.targets[0].target, assign.value
            names = [e.value for e in tgt.elements] if isinstance(tgt, cst.Tuple) else [tgt]
            values = [e.value for e in val.elements] if isinstance(val, cst.Tuple) and isinstance(tgt, cst.Tuple) else [val]
            for i, n in enumerate(names):
                if m.matches(n, m.Name(self.iv)):
                    defs.append((stmt, i, values[i] if len(values) == len(names) else None))
        if len(defs) != 1:
            self.refuse(f"{self.iv} is assigned {len(defs)}× at the top of {self.kernel.name}")
        stmt, idx, value = defs[0]
        axis = (pid_call(value) or (None,))[0] if value is not None else None
        if axis is None:
            self.refuse(f"{self.iv} is not a program_id axis of its own (line {self.line(stmt)}: `{code(stmt)}`)")
        self.axis = axis
        self.replace(stmt, lambda u, i=idx: _drop_target(u, i))
        # i_v may appear only in its definition and the tile offset
        uses = [n for n in m.findall(fn.body, m.Name(self.iv))]
        if len(uses) != 2:
            lines = sorted({self.line(n) for n in uses} - {self.line(stmt), self.line(offset)})
            self.refuse(f"{self.iv} is used beyond the tile offset (line {', '.join(map(str, lines)) or self.line(offset)}): fuse by hand")
        calls = m.findall(fn.body, m.Call(func=m.Attribute(value=m.Name("tl"), attr=m.Name("num_programs"))))
        if any(m.matches(c, m.Call(args=[m.Arg(m.Integer(str(axis)))])) for c in calls):
            self.refuse(f"{self.kernel.name} reads tl.num_programs({axis}), the axis being removed")
        # the fused tile is next_power_of_2(V) wide: V accesses must be masked with o_v < V
        masked = m.findall(fn.body, m.Comparison(left=m.Name(self.ov), comparisons=[m.ComparisonTarget(operator=m.LessThan())]))
        if not masked:
            self.refuse(f"the V tile {self.ov} is never masked (no `{self.ov} < V`): a next_power_of_2(V) tile would overrun V")
        # the other tile dimension, for the num_warps choice
        others = {p.name for p in self.kernel.params if p.constexpr and p.name != self.block}
        aranges = m.findall(fn.body, m.Call(func=m.Attribute(value=m.Name("tl"), attr=m.Name("arange")), args=[m.Arg(m.Integer("0")), m.Arg(m.Name())]))
        self.k_block = sorted({a.args[1].value.value for a in aranges} & others)  # type: ignore[attr-defined]

    def _plan_launch(self, host: cst.FunctionDef, line: int) -> None:
        k = self.kernel
        call, at = self.launch_in(host, line)
        stmt = host.body.body[at]
        grid = call.func.slice[0].slice.value  # type: ignore[union-attr]
        assigns = launcher_assigns(host)
        if isinstance(grid, cst.Name):
            found = assigns.get(grid.value, [])
            if len(found) != 1 or not isinstance(found[0][1], (cst.Tuple, cst.Lambda)):
                self.refuse(f"the grid `{grid.value}` is not assigned once as a tuple in {host.name.value}")
            grid = found[0][1]
        if isinstance(grid, cst.Lambda):
            self.refuse(f"the grid of line {line} is a callable (`{code(grid)[:40]}...`): the V tiles are sized by the autotuner")
        if not isinstance(grid, cst.Tuple) or self.axis >= len(grid.elements):
            self.refuse(f"the grid of line {line} has no axis {self.axis} for the V tiles")
        if len(grid.elements) == 1:
            self.refuse(f"the V tiles are the only grid axis of line {line}: fused, the kernel would run one program")
        cdiv = grid.elements[self.axis].value
        if not m.matches(cdiv, m.Call(func=m.Attribute(value=m.Name("triton"), attr=m.Name("cdiv")))):
            self.refuse(f"grid axis {self.axis} is `{code(cdiv)}`, not triton.cdiv(V, {self.block}): the V tiles are not a separate grid axis")
        v = code(cdiv.args[0].value)  # type: ignore[attr-defined]
        self.replace(grid, lambda u, a=self.axis: _drop_element(u, a))
        # how the launch passes BV
        params = [p.name for p in k.params]
        arg = next((a for a in call.args if a.keyword and a.keyword.value == self.block), None)
        if arg is None:
            pos = params.index(self.block)
            positional = [a for a in call.args if a.keyword is None]
            arg = positional[pos] if pos < len(positional) else None
        if arg is None:
            self.refuse(f"the launch on line {line} does not pass {self.block}")
        v_val = _int_value(v, self.facts.constants, self.facts.host_assigns.get(host.name.value, {}))
        if v_val is not None:
            bv = 1 << max(0, (v_val - 1).bit_length())
            if bv > self.params["max_block"]:
                self.refuse(f"V = {v_val} needs {self.block} = {bv} > max_block {self.params['max_block']}: "
                            "the fused [K, BV] state would spill; keep the V tiles")
        after, assign_bv, bv_name = stmt, None, self.block
        value = arg.value
        if isinstance(value, cst.Name) and len(assigns.get(value.value, [])) == 1:
            bv_name = value.value
            where, expr = assigns[value.value][0]
            self.replace(expr, lambda u, v=v: cst.parse_expression(f"triton.next_power_of_2({v})"))
            after = where
        else:
            if self.block in assigns:
                self.refuse(f"{host.name.value} already assigns {self.block} but passes `{code(value)}`")
            assign_bv = v
            self.replace(arg, lambda u, b=self.block: u.with_changes(value=cst.Name(b)))
        if "num_warps" in assigns:
            self.refuse(f"{host.name.value} already computes num_warps: choose it for the fused tile by hand")
        kb = None
        if len(self.k_block) == 1:
            kb_arg = next((a for a in call.args if a.keyword and a.keyword.value == self.k_block[0]), None)
            if kb_arg is not None:
                kb = code(kb_arg.value)
                kb = kb if isinstance(kb_arg.value, (cst.Name, cst.Integer, cst.Call, cst.Attribute)) else f"({kb})"
        guard = self.params["max_block"] if v_val is None else None
        block = render_stmts("fuse_v_tiles", "launcher.py.j2", bv=bv_name, assign_bv=assign_bv, guard=guard, v=v, kb=kb, num_warps=self.params["num_warps"])
        warps = next((a for a in call.args if a.keyword and a.keyword.value == "num_warps"), None)
        if warps is not None:
            self.replace(warps, lambda u: u.with_changes(value=cst.Name("num_warps")))
        else:
            self.replace(call, lambda u: u.with_changes(args=[*u.args[:-1], u.args[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))),
                                                              cst.Arg(cst.Name("num_warps"), keyword=cst.Name("num_warps"),
                                                                      equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")))]))
        if assign_bv is not None:
            self.replace(stmt, lambda u, b=block: cst.FlattenSentinel([*b, u]))
        else:
            self.replace(after, lambda u, b=block: cst.FlattenSentinel([*flat(u), *b]))

    # -- editing -----------------------------------------------------------------------
    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._fn.append(node.name.value)

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        # renumber the program axes above the removed one
        if self._fn and self._fn[-1] == self.kernel.name and m.matches(
            updated, m.Call(func=m.Attribute(value=m.Name("tl"), attr=m.Name("program_id") | m.Name("num_programs")), args=[m.Arg(m.Integer())])
        ):
            a = int(updated.args[0].value.value)  # type: ignore[attr-defined]
            if a > self.axis:
                return updated.with_changes(args=[updated.args[0].with_changes(value=cst.Integer(str(a - 1)))])
        return updated

    def leave_FunctionDef(self, original: cst.FunctionDef, updated: cst.FunctionDef) -> cst.FunctionDef:
        self._fn.pop()
        return updated


def _drop_element(node: cst.Tuple, index: int) -> cst.Tuple:
    elements = [e for i, e in enumerate(node.elements) if i != index]
    if len(elements) == 1:  # (x,) keeps its comma
        return node.with_changes(elements=[elements[0].with_changes(comma=cst.Comma())])
    last = node.elements[-1]
    return node.with_changes(elements=[*elements[:-1], elements[-1].with_changes(comma=last.comma)])


def _drop_target(stmt: cst.SimpleStatementLine, index: int):
    """Remove the index-th name (and value) of a tuple assignment, or the whole statement."""
    assign = stmt.body[0]
    tgt, val = assign.targets[0].target, assign.value  # type: ignore[attr-defined]
    if not isinstance(tgt, cst.Tuple):
        return cst.RemovalSentinel.REMOVE
    names = [e for i, e in enumerate(tgt.elements) if i != index]
    values = [e for i, e in enumerate(val.elements) if i != index]
    if len(names) == 1:
        target = assign.targets[0].with_changes(target=names[0].value)
        return stmt.with_changes(body=[assign.with_changes(targets=[target], value=values[0].value)])
    names[-1] = names[-1].with_changes(comma=tgt.elements[-1].comma)
    values[-1] = values[-1].with_changes(comma=val.elements[-1].comma)
    target = assign.targets[0].with_changes(target=tgt.with_changes(elements=names))
    return stmt.with_changes(body=[assign.with_changes(targets=[target], value=val.with_changes(elements=values))])
