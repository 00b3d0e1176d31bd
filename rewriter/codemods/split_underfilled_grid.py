"""Split V across programs when one program per head under-fills the GPU.

Kernel: the V tiles are folded into program axis 0, fastest: `i_nh =
tl.program_id(0)` becomes `i_nh, i_v = tl.program_id(0) // tl.cdiv(V, BV),
tl.program_id(0) % tl.cdiv(V, BV)`, so the tiles of one head run side by side
(they share the head's inputs in L2 and read adjacent sectors of each state
row: on an H200 this order was 1-4% faster than a separate last axis for KDA
decode at batch 1-512), axis 0 keeps its 2^31 limit and no other axis changes;
the V offset `o_v = tl.arange(0, BV)` becomes `i_v * BV + tl.arange(0, BV)`.
A kernel that covers V with `tl.arange(0, V)` gains a `BV: tl.constexpr`
parameter for the tile. Launcher: a generated block
(template launcher.py.j2) caps BV at `max_bv` and halves it while the grid's
programs times cdiv(V, BV) are fewer than `programs_per_sm` times the SM count,
down to `min_bv` (or fixes BV at `block`); the grid's axis 0 is multiplied by `triton.cdiv(V, BV)`, and
`_num_sms` (template num_sms.py.j2) is added unless the file has one. A literal
num_warps becomes 1 for tiles of 16 or less.

Refuses: V columns that are not independent (a reduction or tl.dot over the V
tile), a kernel that reads tl.num_programs(0) (folding changes it), a grid that
is a callable, a BV chosen by the autotuner, a V tile used inline more than
once, no V tile to split, a V extent the kernel cannot name (mask the tile
with `o_v < V`).
"""
from __future__ import annotations

import re

import libcst as cst
import libcst.matchers as m
from libcst.codemod.visitors import AddImportsVisitor
from libcst.metadata import PositionProvider

from patterns.rewriter.edits import (
    PlannedCodemod, code, factor, flat, fold_pid, kwarg, launcher_assigns, param_separator, pid_call, render_stmts,
)

BLOCK_NAMES = ("BV", "BLOCK_V", "BLOCK_DV")
V_NAMES = ("V", "DV")  # kernels that cover V whole: o_v = tl.arange(0, V)
REDUCTIONS = {"tl.sum", "tl.max", "tl.min", "tl.reduce", "tl.argmax", "tl.argmin", "tl.cumsum", "tl.cumprod", "tl.associative_scan", "tl.xor_sum"}
TILE = "i_v"


def _arange(block: str) -> m.Call:
    return m.Call(func=m.Attribute(value=m.Name("tl"), attr=m.Name("arange")), args=[m.Arg(m.Integer("0")), m.Arg(m.Name(block))])


class SplitUnderfilledGrid(PlannedCodemod):
    PATTERN = "split_underfilled_grid"
    DESCRIPTION = "split V across more programs when the grid under-fills the SMs"

    # -- planning ----------------------------------------------------------------------
    def plan(self, node: cst.Module) -> None:
        k = self.kernel
        fixed = self.params["block"]
        if fixed < 0 or fixed & (fixed - 1):
            self.refuse(f"--param block={fixed}: a V tile is a power of two (or 0 to choose from the SM count)")
        for name in ("min_bv", "max_bv"):
            if self.params[name] < 1 or self.params[name] & (self.params[name] - 1):
                self.refuse(f"--param {name}={self.params[name]}: a V tile is a power of two")
        if self.params["min_bv"] > self.params["max_bv"]:
            self.refuse(f"--param min_bv={self.params['min_bv']} is above max_bv={self.params['max_bv']}")
        fn = self.fn
        if any(c.via and c.name in ("tl.program_id", "tl.num_programs") for c in k.calls):
            self.refuse(f"a helper of {k.name} reads program ids: renumbering its axes is not automated")
        if any((c.args[0] if c.args else c.kwargs.get("axis", "0")) == "0" for c in k.calls_named("tl.num_programs")):
            self.refuse(f"{k.name} reads tl.num_programs(0): folding the V tiles into axis 0 would change it")
        self.module_code = node.code
        self._plan_kernel(fn)
        if not k.launches:
            self.refuse(f"no launch of {k.name} in this file: the launcher must change with the kernel")
        hosts = {s.name.value: (i, s) for i, s in enumerate(node.body) if isinstance(s, cst.FunctionDef)}
        for la in k.launches:
            if la.function not in hosts:
                self.refuse(f"the launch on line {la.line} is not in a top-level function")
            self._plan_launch(hosts[la.function][1], la.line)
        if "_num_sms" not in hosts and not self.params["block"]:
            first = min((hosts[la.function] for la in k.launches), key=lambda t: t[0])[1]
            helper = render_stmts("split_underfilled_grid", "num_sms.py.j2")
            self.replace(first, lambda u, h=helper: cst.FlattenSentinel(
                [h[0].with_changes(leading_lines=u.leading_lines), u.with_changes(leading_lines=[cst.EmptyLine(), cst.EmptyLine()])]))
            if self.facts.imports.get("torch") != "torch":
                AddImportsVisitor.add_needed_import(self.context, "torch")

    def _plan_kernel(self, fn: cst.FunctionDef) -> None:
        k = self.kernel
        blocks = [p.name for p in k.params if p.constexpr and p.name in BLOCK_NAMES]
        if len(blocks) > 1:
            self.refuse(f"{k.name} has several V block constexprs ({', '.join(blocks)})")
        if blocks and k.autotune is not None and any(blocks[0] in cfg or blocks[0] in cfg.get("source", "") for cfg in k.autotune.configs):
            self.refuse(f"{blocks[0]} is chosen by @triton.autotune: the launcher cannot size the split")
        if blocks and blocks[0] in k.heuristics:
            self.refuse(f"{blocks[0]} is chosen by @triton.heuristics: the launcher cannot size the split")
        extents = [blocks[0]] if blocks else [p.name for p in k.params if p.constexpr and p.name in V_NAMES]
        found = []
        for extent in extents:
            uses = m.findall(fn.body, _arange(extent))
            for stmt in fn.body.body:
                for assign in m.findall(stmt, m.Assign(targets=[m.AssignTarget(m.Name())], value=_arange(extent))):
                    found.append((extent, assign.targets[0].target.value, assign.value, len(uses)))  # type: ignore[attr-defined]
        if len(found) != 1:
            self.refuse(f"no V tile to split: expected one `o_v = tl.arange(0, {'/'.join(BLOCK_NAMES + V_NAMES)})`, found {len(found)}")
        extent, self.ov, offset, uses = found[0]
        if uses != 1:
            self.refuse(f"tl.arange(0, {extent}) is used {uses}× in {k.name}: only the o_v offset can be tiled")
        self.block = blocks[0] if blocks else "BV"
        self.kernel_v = None if blocks else extent  # V covered whole: the kernel gains BV
        if self.kernel_v is not None:
            if any(p.name == "BV" for p in k.params):
                self.refuse(f"{k.name} already has a parameter named BV")
            shaped = [n for n in m.findall(fn.body, m.List()) if m.findall(n, m.Name(extent))]
            if shaped:
                self.refuse(f"line {self.line(shaped[0])}: {extent} sizes a block (`{code(shaped[0])}`): it would become BV")
        if TILE in k.assigns or any(p.name == TILE for p in k.params):
            self.refuse(f"{k.name} already has a variable named {TILE}")
        # every V column must be computed alone: no reduction or dot across the V tile
        # which axis of the 2-D tiles V is: o_v[None, :] -> 1, o_v[:, None] -> 0
        subs = {sub.replace(" ", "") for t in self._texts_with(self.ov) for sub in re.findall(rf"\b{self.ov}\[([^\]]*)\]", t)}
        axis_of_v = {"None,:": "1", ":,None": "0"}.get(subs.pop()) if len(subs) == 1 else None
        for c in k.calls:
            if c.via or self.ov not in c.depends_on:
                continue
            if c.name == "tl.dot":
                self.refuse(f"line {c.line}: tl.dot on values of the V tile: cannot tell whether it contracts over V")
            if c.name in REDUCTIONS:
                axis = c.args[1] if len(c.args) > 1 else c.kwargs.get("axis")
                two_d = c.args and "None" in c.args[0]
                if axis is None or axis_of_v is None or axis == axis_of_v or not two_d:
                    self.refuse(f"line {c.line}: {c.name} over the V tile: V columns are not independent, the split would need a merge")
        self.replace(offset, lambda u, b=self.block: cst.parse_expression(f"{TILE} * {b} + tl.arange(0, {b})"))
        # the V extent as the kernel knows it (the launcher passes it): the whole-V constexpr, or the bound of the tile's mask
        if self.kernel_v is not None:
            self.v_param = self.kernel_v
        else:
            mask = m.findall(fn, m.Comparison(left=m.Name(self.ov), comparisons=[m.ComparisonTarget(operator=m.LessThan(), comparator=m.Name())]))
            if not mask:
                self.refuse(f"cannot tell the V extent in {k.name}: mask the tile with `{self.ov} < V`")
            self.v_param = mask[0].comparisons[0].comparator.value  # type: ignore[attr-defined]
        # the tile index: folded into program axis 0 as its fastest-varying part
        pid_stmt = None
        for stmt in fn.body.body:
            if m.matches(stmt, m.SimpleStatementLine(body=[m.Assign(targets=[m.AssignTarget()])])):
                tgt, val = stmt.body[0].targets[0].target, stmt.body[0].value  # type: ignore[attr-defined]
                values = [e.value for e in val.elements] if isinstance(val, cst.Tuple) and isinstance(tgt, cst.Tuple) else [val]
                if any((pid_call(v) or (-1,))[0] == 0 for v in values):
                    pid_stmt = stmt
                    break
        if pid_stmt is None:
            self.refuse(f"{k.name} has no `... = tl.program_id(0)` statement to fold the tile index into")
        self.replace(pid_stmt, lambda u, n=f"tl.cdiv({self.v_param}, {self.block})": fold_pid(u, 0, n, TILE))
        if self.kernel_v is not None:
            pos = lambda n: self.get_metadata(PositionProvider, n)  # noqa: E731
            sep = param_separator(fn, self.module_code, pos, "BV: tl.constexpr")
            self.replace(fn.params, lambda u, c=sep: _add_block_param(u, c))

    def _texts_with(self, name: str) -> list[str]:
        texts = [expr for _, expr in self.kernel.assigns.values()]
        texts += [a for c in self.kernel.calls for a in [*c.args, *c.kwargs.values()]]
        return [t for t in texts if f"{name}[" in t]

    def _plan_launch(self, host: cst.FunctionDef, line: int) -> None:
        k = self.kernel
        call, launch_at = self.launch_in(host, line)
        stmts = list(host.body.body)
        assigns = launcher_assigns(host)
        grid = call.func.slice[0].slice.value  # type: ignore[union-attr]
        grid_at = launch_at
        if isinstance(grid, cst.Name):
            found = assigns.get(grid.value, [])
            if len(found) != 1:
                self.refuse(f"the grid `{grid.value}` is not assigned once in {host.name.value}")
            grid_at = stmts.index(found[0][0])
            grid = found[0][1]
        if isinstance(grid, cst.Lambda):
            self.refuse(f"the grid of line {line} is a callable: its size is chosen at launch, not by the launcher")
        if not isinstance(grid, cst.Tuple) or len(grid.elements) >= 3:
            self.refuse(f"the grid of line {line} (`{code(grid)}`) is not a tuple of one or two axes")
        programs = " * ".join(factor(e.value) for e in grid.elements)
        params = [p.name for p in k.params]
        positional = [a for a in call.args if a.keyword is None]

        def passed(name: str) -> cst.Arg | None:
            arg = next((a for a in call.args if a.keyword and a.keyword.value == name), None)
            if arg is None and name in params and params.index(name) < len(positional):
                arg = positional[params.index(name)]
            return arg

        # the V extent on the host
        v_arg = passed(self.v_param)
        bv_arg = passed(self.block) if self.kernel_v is None else None
        if self.kernel_v is None and bv_arg is None:
            self.refuse(f"the launch on line {line} does not pass {self.block}")
        v = code(v_arg.value) if v_arg is not None else None
        if v is None and bv_arg is not None:
            start = bv_arg.value
            if isinstance(start, cst.Name) and len(assigns.get(start.value, [])) == 1:
                start = assigns[start.value][0][1]
            if m.matches(start, m.Call(func=m.Attribute(value=m.Name("triton"), attr=m.Name("next_power_of_2")))):
                v = code(start.args[0].value)  # type: ignore[attr-defined]
        if v is None:
            self.refuse(f"cannot tell the V extent at the launch on line {line}: mask the tile with `{self.ov} < V`")
        device = next((a.value.value for a in positional if isinstance(a.value, cst.Name) and a.value.value in _params(host)), None)
        if device is None:
            self.refuse(f"the launch on line {line} passes no tensor argument of {host.name.value} to read the device from")
        # where the block goes: before the first statement after BV's definition that reads BV
        assign_bv, bv = None, self.block
        if bv_arg is not None and isinstance(bv_arg.value, cst.Name) and len(assigns.get(bv_arg.value.value, [])) == 1:
            bv = bv_arg.value.value
            defined = stmts.index(assigns[bv][0][0])
            at = next(i for i in range(defined + 1, len(stmts)) if m.findall(stmts[i], m.Name(bv)) or i == launch_at)
        else:
            if self.block in assigns:
                self.refuse(f"{host.name.value} already assigns {self.block} but passes `{code(bv_arg.value) if bv_arg else 'nothing'}`")
            assign_bv = code(bv_arg.value) if bv_arg is not None else f"triton.next_power_of_2({v})"
            at = min(grid_at, launch_at)
            if bv_arg is not None:
                self.replace(bv_arg, lambda u, b=self.block: u.with_changes(value=cst.Name(b)))
            else:
                self._add_launch_kwarg(call, passed(self.kernel_v), self.block)
        block = render_stmts("split_underfilled_grid", "launcher.py.j2", bv=bv, assign_bv=assign_bv, block=self.params["block"], min_bv=self.params["min_bv"],
                        max_bv=self.params["max_bv"], per_sm=self.params["programs_per_sm"],
                        programs=programs, programs_text=programs.replace(" ", ""), v=v, device=f"{device}.device")
        self.replace(stmts[at], lambda u, b=block: cst.FlattenSentinel([*b, *flat(u)]))
        self.replace(grid, lambda u, e=f"triton.cdiv({v}, {bv})": u.with_changes(elements=[
            u.elements[0].with_changes(value=cst.parse_expression(f"{factor(u.elements[0].value)} * {e}")), *u.elements[1:]]))
        warps = next((a for a in call.args if a.keyword and a.keyword.value == "num_warps"), None)
        if warps is not None and isinstance(warps.value, cst.Integer):
            self.replace(warps, lambda u, b=bv: u.with_changes(value=cst.parse_expression(f"1 if {b} <= 16 else {u.value.value}")))

    def _add_launch_kwarg(self, call: cst.Call, after: cst.Arg | None, name: str) -> None:
        """`BV=BV` right after the V keyword, else before the launch options (num_warps, ...), else last."""
        options = ("num_warps", "num_stages", "num_ctas", "maxnreg", "enable_fp_fusion")
        if after is not None and after.keyword is not None:
            at = call.args.index(after) + 1
        else:
            at = next((i for i, a in enumerate(call.args) if a.keyword and a.keyword.value in options), len(call.args))

        def edit(u: cst.Call) -> cst.Call:
            args = list(u.args)
            space = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
            if at == len(args):
                comma = args[-1].comma
                args[-1] = args[-1].with_changes(comma=space)
                args.append(kwarg(name, name).with_changes(comma=comma))
            else:
                args.insert(at, kwarg(name, name).with_changes(comma=space))
            return u.with_changes(args=args)

        self.replace(call, edit)


def _params(host: cst.FunctionDef) -> set[str]:
    return {p.name.value for p in [*host.params.posonly_params, *host.params.params, *host.params.kwonly_params]}


def _add_block_param(params: cst.Parameters, comma: cst.Comma) -> cst.Parameters:
    """Append `BV: tl.constexpr` after the last parameter."""
    items = list(params.params)
    last = items[-1]
    items[-1] = last.with_changes(comma=comma)
    items.append(cst.Param(cst.Name("BV"), annotation=cst.Annotation(cst.parse_expression("tl.constexpr"), whitespace_before_indicator=cst.SimpleWhitespace("")),
                           comma=last.comma))
    return params.with_changes(params=items)
