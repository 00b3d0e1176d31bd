"""Map linear program ids to output tiles in grouped order (GROUP_SIZE_M swizzle) instead of row-major.

Kernel: the row-major decomposition `pid_m = pid // num_pid_n; pid_n = pid % num_pid_n`
(two statements or one tuple assignment, `pid` being a program id or a persistent
loop's tile id) becomes the grouped order of template grouped.py.j2; a
`num_pid_m = tl.cdiv(M, BM)` is added where the kernel has none (M read from the
`o_m < M` mask of the M tile). A constexpr GROUP_SIZE_M (GROUP_M when the blocks
are named BM/BLOCK_M) is appended to the signature. Launcher: the launch passes
GROUP_SIZE_M=<group_size_m> (param, default 8). The mapping is a bijection on the
same tiles, so the grid and the results stay the same (bit-identical).

Refuses: tiles taken from two program-id axes (a 2-D grid: linearise it first);
a decomposition that is not `pid // num_pid_n` with `pid % num_pid_n`; a divisor
that does not count the N tiles; an M tile with no mask to read M from; an
autotuned kernel (GROUP_SIZE_M belongs in its configs); generated names already
taken.
"""
from __future__ import annotations

import libcst as cst
import libcst.matchers as m

from patterns.rewriter.edits import PlannedCodemod, block_dims, code, find_launch, insert_args, insert_params, kwarg, new_param, pid_axes, render, stmts

GENERATED = ("num_pid_in_group", "group_id", "first_pid_m", "group_size_m")


class GroupedPidOrdering(PlannedCodemod):
    PATTERN = "grouped_pid_ordering"
    DESCRIPTION = "linear program ids mapped to tiles in GROUP_SIZE_M groups for L2 reuse"

    def plan(self, module: cst.Module) -> None:
        k = self.kernel
        body = self.body
        axes = pid_axes(body)
        pairs, divs = self._decompositions()
        if not pairs:
            tiles = self._tile_vars()
            if len(axes) > 1 and len({a for _, a in tiles}) > 1:
                (vm, am), (vn, an) = tiles[0], tiles[1]
                bm, bn = self._block_of(vm) or "BM", self._block_of(vn) or "BN"
                self.refuse(f"the tiles come from a 2-D grid ({vm} = program_id({am}), {vn} = program_id({an})): launch a 1-D grid of "
                            f"cdiv(M, {bm})·cdiv(N, {bn}) programs with `{vm}, {vn} = pid // num_pid_n, pid % num_pid_n` first "
                            "(or call tl.swizzle2d on the 2-D ids)")
            if divs:
                stmt, a, x, d = divs[0]
                others = [s for s in m.findall(self.fn.body, m.SimpleStatementLine()) if s is not stmt and self.body.depends(s, {a})
                          and any(isinstance(t, cst.Assign) for t in s.body)]
                where = f" (line {self.line(others[0])}: `{code(others[0])}`)" if others else ""
                self.refuse(f"`{a} = {x} // {d}` has no `{x} % {d}` partner{where}: not the recognisable row-major "
                            f"`{x} // {d}, {x} % {d}` form; write it that way first")
            self.refuse(f"{k.name} has no `pid // num_pid_n, pid % num_pid_n` decomposition of a linear program id")
        if k.autotune is not None:
            self.refuse(f"{k.name} is autotuned: add GROUP_M to its configs and decompose by hand")
        if len(pairs) > 1:
            self.refuse(f"{k.name} decomposes a program id {len(pairs)} times: choose by hand")
        (div_stmt, a, x, d), (mod_stmt, b) = pairs[0]
        # the divisor counts the tiles of b's axis; a is the row tile
        count = body.single(d)
        bm, bn = self._block_of(a), self._block_of(b)
        if not (isinstance(count, cst.Call) and code(count.func) == "tl.cdiv" and len(count.args) == 2 and isinstance(count.args[1].value, cst.Name)):
            self.refuse(f"`{d}` is not a `tl.cdiv(N, BN)` tile count assigned once in {k.name}")
        if bm is None or bn is None:
            self.refuse(f"{a if bm is None else b} is not scaled by a block constexpr: cannot tell the tile shape")
        if count.args[1].value.value != bn:  # type: ignore[attr-defined]
            self.refuse(f"`{d} = {code(count)}` does not count the {bn} tiles that `{b}` indexes")
        # the M extent and tile count
        num_pid_m = next((n for n, bs in body.bindings.items()
                          if (v := body.single(n)) is not None and m.matches(v, m.Call(func=m.Attribute(value=m.Name("tl"), attr=m.Name("cdiv")),
                                                                                          args=[m.Arg(), m.Arg(m.Name(bm))]))), None)
        new_count = None
        if num_pid_m is None:
            dims = [dim for dim, bs in block_dims(body, {bm}).items() if bm in bs]
            if len(dims) != 1:
                self.refuse(f"cannot read the M extent of the {bm} tile (no single `o_m < M` mask): write num_pid_m = tl.cdiv(M, {bm}) first")
            num_pid_m = "num_pid_m"
            new_count = stmts(render(self.PATTERN, "num_pid_m.py.j2", num_pid_m=num_pid_m, m=dims[0], bm=bm))
        group = "GROUP_SIZE_M" if bm.startswith("BLOCK_SIZE") else "GROUP_M"
        taken = [n for n in (*GENERATED, group, num_pid_m if new_count else "") if n and (n in body.bindings or k.param(n))]
        if taken:
            self.refuse(f"{k.name} already uses {', '.join(taken)}: rename before grouping")
        if not k.launches:
            self.refuse(f"no launch of {k.name} in this file: the launcher must pass {group}")
        # -- kernel edits
        block = stmts(render(self.PATTERN, "grouped.py.j2", pid=x, num_pid_n=d, num_pid_m=num_pid_m, pid_m=a, pid_n=b, group=group))
        if new_count:
            count_stmt = body.bindings[d][0].line
            self.insert_before(count_stmt if count_stmt is not None else div_stmt, new_count)
        self.insert_before(div_stmt, block)
        self.remove(div_stmt)
        if mod_stmt is not div_stmt:
            self.remove(mod_stmt)
        self.replace(self.fn, lambda u: insert_params(u, [(len(u.params.params), new_param(group, "tl.constexpr"))]))
        # -- launcher
        params = [p.name for p in k.params]
        for launch in k.launches:
            la = find_launch(self, module, launch.line, params)
            after = max((i for i, a in enumerate(la.call.args) if a.keyword is None or a.keyword.value in params), default=-1)
            self.replace(la.call, lambda u, i=after: insert_args(u, [(i + 1, kwarg(group, str(self.params["group_size_m"])))]))
            self.keep_width(la.stmt)

    # -- reading -----------------------------------------------------------------------
    def _decompositions(self):
        """([((stmt, a, x, d), (stmt, b))], divs) for `a = x // d` with `b = x % d`."""
        divs, mods = [], []
        for line in m.findall(self.fn.body, m.SimpleStatementLine()):
            if len(line.body) != 1 or not isinstance(line.body[0], cst.Assign) or len(line.body[0].targets) != 1:  # type: ignore[attr-defined]
                continue
            assign = line.body[0]  # type: ignore[attr-defined]
            tgt, val = assign.targets[0].target, assign.value
            pairs = [(tgt, val)]
            if isinstance(tgt, cst.Tuple) and isinstance(val, cst.Tuple) and len(tgt.elements) == len(val.elements):
                pairs = [(t.value, v.value) for t, v in zip(tgt.elements, val.elements)]
            for t, v in pairs:
                if not isinstance(t, cst.Name) or not isinstance(v, cst.BinaryOperation):
                    continue
                if not (isinstance(v.left, cst.Name) and isinstance(v.right, cst.Name)):
                    continue
                if isinstance(v.operator, cst.FloorDivide):
                    divs.append((line, t.value, v.left.value, v.right.value))
                elif isinstance(v.operator, cst.Modulo):
                    mods.append((line, t.value, v.left.value, v.right.value))
        pairs = [(dv, (ms, b)) for dv in divs for (ms, b, x, d) in mods if (x, d) == (dv[2], dv[3])]
        pairs = [p for p in pairs if p[0][2] in self.kernel.pid_deps]
        return pairs, divs

    def _tile_vars(self) -> list[tuple[str, int]]:
        """(index, program_id axis) for names assigned straight from tl.program_id(axis)."""
        out = []
        for name, bs in self.body.bindings.items():
            v = self.body.single(name)
            if v is not None and m.matches(v, m.Call(func=m.Attribute(attr=m.Name("to"))) ):
                v = v.func.value  # type: ignore[attr-defined]
            if v is not None and m.matches(v, m.Call(func=m.Attribute(value=m.Name("tl"), attr=m.Name("program_id")), args=[m.Arg(m.Integer())])):
                if self._block_of(name):
                    out.append((name, int(v.args[0].value.value)))  # type: ignore[attr-defined]
        return sorted(out, key=lambda t: t[1])

    def _block_of(self, var: str) -> str | None:
        """The constexpr B of `var * B` in the kernel."""
        constexprs = set(self.kernel.constexprs)
        for mul in m.findall(self.fn.body, m.BinaryOperation(operator=m.Multiply())):
            sides = (mul.left, mul.right)  # type: ignore[attr-defined]
            for s, o in (sides, sides[::-1]):
                if m.matches(s, m.Name(var)) and isinstance(o, cst.Name) and o.value in constexprs:
                    return o.value
        return None

