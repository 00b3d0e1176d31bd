"""Make a one-program-per-tile kernel persistent: NUM_SMS programs loop over the tiles.

Kernel: `pid = tl.program_id(0)` goes; the statements from the first one that
reads pid to the end of the kernel become the body of
`for tile_id in range(tl.program_id(0), num_tiles, NUM_SMS)` (template
tile_loop.py.j2) with pid renamed tile_id (or `pid = tl.cast(tile_id, ...)` when
pid was cast). The statements before it stay the once-per-program prologue, and
pure per-tile statements that read nothing the tile changes (`o_k =
tl.arange(0, BK)`) move up to it. num_tiles is the launch grid's tile count in
kernel terms (`triton.cdiv(M, BM)` -> `tl.cdiv(M, BLOCK_SIZE_M)`, reusing the
kernel's own `num_pid_m`-style names). NUM_SMS is a new constexpr parameter.
Launcher (template launcher.py.j2): NUM_SMS is the device's multiprocessor count
on CUDA (4 programs elsewhere, to exercise the loop in the interpreter), the grid
becomes (min(NUM_SMS, num_tiles),) and the launch passes NUM_SMS. Each tile is
computed by the same code as before: results are bit-identical.

Refuses: an early `return` (it would also drop the program's later tiles); a
program id on another axis, tl.num_programs, or program_id(0) read outside one
`pid = tl.program_id(0)` at the top of the kernel; a grid that is not a 1-D tuple,
or whose tile count uses values the kernel does not receive.
"""
from __future__ import annotations

import libcst as cst
import libcst.matchers as m
from libcst.codemod.visitors import AddImportsVisitor

from patterns.rewriter.edits import (
    PlannedCodemod, block_dims, code, expr, insert_args, insert_params, kwarg, names_in, new_param, only_launch, pid_axes, render, stmts,
)

TILE, COUNT, SMS = "tile_id", "num_tiles", "NUM_SMS"
_PURE_CALLS = {"tl.arange", "tl.cdiv", "tl.minimum", "tl.maximum", "min", "max", "tl.full", "tl.zeros"}


class PersistentTileLoop(PlannedCodemod):
    PATTERN = "persistent_tile_loop"
    DESCRIPTION = "NUM_SMS programs loop over the output tiles instead of one program per tile"

    def plan(self, module: cst.Module) -> None:
        k = self.kernel
        fn, body = self.fn, self.body
        for ret in m.findall(fn.body, m.Return()):
            self.refuse(f"the early `return` on line {self.line(ret)} would also drop the program's later tiles: "
                        "turn it into an `if` around the tile body")
        axes = pid_axes(body)
        for axis, calls in sorted(axes.items()):
            if axis != 0:
                self.refuse(f"program_id({axis}) (line {self.line(calls[0])}) cannot be remapped onto one tile loop: "
                            "linearise the grid first (grouped_pid_ordering's 1-D form)")
        for c in body.calls("tl.num_programs"):
            self.refuse(f"tl.num_programs on line {self.line(c)} would count the persistent programs, not the tiles")
        top = list(fn.body.body)
        pid_at, pid, cast = self._pid(top, axes.get(0, []))
        taken = [n for n in (TILE, COUNT, SMS) if n in body.bindings or k.param(n)]
        if taken:
            self.refuse(f"{k.name} already uses {', '.join(taken)}")
        deps = [i for i, s in enumerate(top) if i != pid_at and body.depends(s, {pid})]
        if not deps:
            self.refuse(f"nothing in {k.name} reads {pid}: there is no per-tile work to loop over")
        first = deps[0]
        prologue = [i for i in range(first) if i != pid_at]
        hoisted = self._hoistable(top[first:], pid)
        params = [p.name for p in k.params]
        la, grid, grid_stmt = only_launch(self, module)
        if not (isinstance(grid, cst.Tuple) and len(grid.elements) == 1):
            self.refuse(f"the grid `{code(grid)}` is not a 1-D tuple: the tile count cannot be read from it")
        tiles = grid.elements[0].value
        count = self._kernel_count(la, tiles, [top[i] for i in prologue])
        taken = [n for n in (SMS, COUNT) if la.assigns.get(n)]
        if taken:
            self.refuse(f"{la.host.name.value} already assigns {', '.join(taken)}")
        tensor = self._tensor(la)
        # -- kernel
        lines = stmts(render(self.PATTERN, "tile_loop.py.j2", num_tiles=count, tile=TILE, num_sms=SMS))
        count_stmt, loop = lines[0], lines[1]
        region = [i for i in range(first, len(top)) if top[i] not in hoisted]
        moved = [i for i in range(first, len(top)) if top[i] in hoisted]

        def rebuild(u: cst.FunctionDef) -> cst.FunctionDef:
            stmts_u = list(u.body.body)
            inner = [stmts_u[i] for i in region]
            if cast is None:
                inner = [s.visit(_Rename(pid, TILE)) for s in inner]
            else:
                # tl.cast rather than .to: the interpreter iterates range() with Python ints
                inner.insert(0, cst.parse_statement(f"{pid} = tl.cast({TILE}, {cast})\n"))
            inner[0] = inner[0].with_changes(leading_lines=[ln for ln in inner[0].leading_lines if ln.comment is not None])
            new_loop = loop.with_changes(body=loop.body.with_changes(body=inner))
            new_body = [stmts_u[i] for i in prologue] + [count_stmt] + [stmts_u[i] for i in moved] + [new_loop]
            if pid_at == 0 and stmts_u[0].leading_lines and new_body:
                new_body[0] = new_body[0].with_changes(leading_lines=[*stmts_u[0].leading_lines, *new_body[0].leading_lines])
            u = u.with_changes(body=u.body.with_changes(body=new_body))
            return insert_params(u, [(len(u.params.params), new_param(SMS, "tl.constexpr"))])

        self.replace(fn, rebuild)
        # -- launcher
        block = stmts(render(self.PATTERN, "launcher.py.j2", num_sms=SMS, t=tensor, tiles=code(tiles), cpu_programs=self.params["cpu_programs"]))
        self.insert_before(grid_stmt or la.stmt, block)
        new_grid = expr(f"(min({SMS}, {COUNT}),)")
        self.replace(grid, lambda u: new_grid)
        after = max((i for i, a in enumerate(la.call.args) if a.keyword is None or a.keyword.value in params), default=-1)
        self.replace(la.call, lambda u: insert_args(u, [(after + 1, kwarg(SMS, SMS))]))
        self.keep_width(la.stmt)
        if self.facts.imports.get("torch") != "torch":
            AddImportsVisitor.add_needed_import(self.context, "torch")

    # -- reading -----------------------------------------------------------------------
    def _pid(self, top: list[cst.BaseStatement], calls: list[cst.Call]) -> tuple[int, str, str | None]:
        """(index of `pid = tl.program_id(0)` in the kernel body, pid, the arguments of its `.to(...)` or None)."""
        k = self.kernel
        if len(calls) != 1:
            where = ", ".join(str(self.line(c)) for c in calls) or "nowhere"
            self.refuse(f"program_id(0) is read {len(calls)}× (line {where}): expected one `pid = tl.program_id(0)`")
        for i, s in enumerate(top):
            if not m.matches(s, m.SimpleStatementLine(body=[m.Assign(targets=[m.AssignTarget(m.Name())])])):
                continue
            value = s.body[0].value  # type: ignore[attr-defined]
            cast = None
            if m.matches(value, m.Call(func=m.Attribute(attr=m.Name("to")))) and value.func.value is calls[0]:  # type: ignore[attr-defined]
                cast = ", ".join(code(a) for a in value.args)  # type: ignore[attr-defined]
            elif value is not calls[0]:
                continue
            name = s.body[0].targets[0].target.value  # type: ignore[attr-defined]
            if len(self.body.bindings.get(name, [])) != 1:
                self.refuse(f"{name} is reassigned in {k.name}: the tile id cannot replace it")
            return i, name, cast
        self.refuse(f"program_id(0) (line {self.line(calls[0])}) is not assigned to a name by a top-level statement of {k.name}")
        raise AssertionError  # unreachable

    def _hoistable(self, region: list[cst.BaseStatement], pid: str) -> set:
        """Pure single assignments of the tile body that read nothing the tile changes: once per program suffices."""
        assigned: set[str] = set()
        for s in region:
            for t in m.findall(s, m.AssignTarget() | m.AugAssign() | m.For()):
                assigned |= names_in(t.target)  # type: ignore[attr-defined]
        out, moved = set(), set()
        for s in region:
            if not m.matches(s, m.SimpleStatementLine(body=[m.Assign(targets=[m.AssignTarget(m.Name())])])):
                continue
            assign = s.body[0]  # type: ignore[attr-defined]
            name = assign.targets[0].target.value
            calls = {code(c.func) for c in m.findall(assign.value, m.Call())}  # type: ignore[attr-defined]
            if calls - _PURE_CALLS or len(self.body.bindings.get(name, [])) != 1:
                continue
            reads = names_in(assign.value) - {"tl", "min", "max"}
            if self.body.depends(assign.value, {pid}) or reads & (assigned - moved):
                continue
            out.add(s)
            moved.add(name)
        return out

    def _kernel_count(self, la, tiles: cst.BaseExpression, prologue: list[cst.BaseStatement]) -> str:
        """The host tile count in kernel terms, reusing the prologue's names for equal sub-expressions."""
        k, codemod = self.kernel, self
        host_to_param = {}
        for p in k.params:
            v = la.value(p.name)
            if isinstance(v, cst.Name):
                host_to_param.setdefault(v.value, p.name)
        dims = block_dims(self.body, set(k.constexprs))
        known = {}
        for s in prologue:
            if m.matches(s, m.SimpleStatementLine(body=[m.Assign(targets=[m.AssignTarget(m.Name())])])):
                known[code(s.body[0].value)] = s.body[0].targets[0].target.value  # type: ignore[attr-defined]
        whole = code(tiles)

        class Translate(cst.CSTTransformer):
            def visit_Attribute(self, node: cst.Attribute) -> bool:
                if code(node) not in ("triton.cdiv", "tl.cdiv"):
                    codemod.refuse(f"the grid's tile count `{whole}` reads `{code(node)}`, which {k.name} does not receive")
                return False

            def visit_Subscript(self, node: cst.Subscript) -> bool:
                codemod.refuse(f"the grid's tile count `{whole}` reads `{code(node)}`, which {k.name} does not receive")
                return False

            def leave_Name(self, o: cst.Name, u: cst.Name) -> cst.Name:
                if o.value in ("triton", "tl", "cdiv"):
                    return u
                if o.value not in host_to_param:
                    codemod.refuse(f"the grid's tile count `{whole}` uses {o.value}, which {k.name} does not receive")
                return u.with_changes(value=host_to_param[o.value])

            def leave_Call(self, o: cst.Call, u: cst.Call) -> cst.BaseExpression:
                if code(o.func) not in ("triton.cdiv", "tl.cdiv") or len(o.args) != 2:
                    codemod.refuse(f"the grid's tile count `{whole}` calls `{code(o.func)}`: compute it in the kernel by hand")
                args = list(u.args)
                if isinstance(o.args[1].value, cst.Integer):
                    lit = int(o.args[1].value.value)
                    dim = u.args[0].value.value if isinstance(u.args[0].value, cst.Name) else ""
                    fits = [b for b in dims.get(dim, set()) if la.literal(la.value(b)) == lit]
                    if not fits:  # no mask names the extent: a block passed exactly this literal
                        fits = [p.name for p in k.params if p.constexpr and la.literal(la.value(p.name)) == lit]
                    if len(fits) == 1:
                        args[1] = args[1].with_changes(value=cst.Name(fits[0]))
                new = u.with_changes(func=expr("tl.cdiv"), args=args)
                name = known.get(code(new))
                return cst.Name(name) if name else new

        out = tiles.visit(Translate())
        return known.get(code(out)) or code(out)

    def _tensor(self, la) -> str:
        """A launcher tensor the kernel reads or writes, for its device."""
        pointers = set(self.kernel.params and [p.name for p in self.kernel.params if not p.constexpr])
        based = set()
        for c in self.body.calls("tl.load", "tl.store"):
            if c.args:
                based |= self.body.bases(c.args[0].value, pointers)
        for p in self.kernel.params:
            v = la.value(p.name)
            if p.name in based and isinstance(v, cst.Name):
                return v.value
        self.refuse("no tensor argument of the launch to read the device from")
        raise AssertionError  # unreachable


class _Rename(cst.CSTTransformer):
    def __init__(self, old: str, new: str):
        super().__init__()
        self.old, self.new = old, new

    def leave_Attribute(self, o: cst.Attribute, u: cst.Attribute) -> cst.Attribute:
        return u.with_changes(attr=o.attr)

    def leave_Arg(self, o: cst.Arg, u: cst.Arg) -> cst.Arg:
        return u.with_changes(keyword=o.keyword)

    def leave_Name(self, o: cst.Name, u: cst.Name) -> cst.Name:
        return u.with_changes(value=self.new) if o.value == self.old else u
