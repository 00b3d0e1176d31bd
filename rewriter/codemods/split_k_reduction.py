"""Split a GEMM's K loop over a new program axis; a generated kernel reduces the fp32 partials.

Kernel: new parameters `partial` (after the output pointer), K_PER_SPLIT (after
the runtime parameters) and SPLIT_K: tl.constexpr; the split index
`i_k = tl.program_id(A)` on the next free axis; before the K loop
`k_start = i_k * K_PER_SPLIT; k_end = tl.minimum(k_start + K_PER_SPLIT, K)`
(template k_range.py.j2), the loop runs over [k_start, k_end) and its K masks
compare against k_end. The tile store becomes `if SPLIT_K == 1:` the original
store, `else:` the fp32 accumulator into partial[i_k] (template store.py.j2).
A reduce kernel (template reduce_kernel.py.j2) is added after the kernel: it sums
the SPLIT_K planes in split order, so results are deterministic run to run.
Launcher (templates launcher.py.j2, reduce_launch.py.j2): split_k (param, default
4; 0 = from the SM count and tile count) is capped by the K blocks and recomputed
so no split is empty, the workspace is allocated (the output itself when
split_k == 1), the grid gains the split axis, and the reduce pass runs after the
launch when split_k > 1. Numerics change: the K sum is regrouped by split.

Refuses: no single K loop with tl.dot, or one that is not `range(0, K, BK)` /
`range(tl.cdiv(K, BK))` over a K parameter; an output accumulated in place (the
output is also loaded) or atomically; an output store that is not a dense masked
[M, N] tile of the fp32 accumulator (an epilogue on it must move into the reduce
pass by hand); an output tensor the launcher does not allocate; a grid that is
not a tuple; an autotuned kernel.
"""
from __future__ import annotations

import libcst as cst
import libcst.matchers as m
from libcst.codemod.visitors import AddImportsVisitor
from libcst.metadata import PositionProvider

from patterns.rewriter.edits import (
    PlannedCodemod, code, expr, insert_args, insert_params, kwarg, new_param, only_launch, paren, pid_axes, render, same, stmts, tile_mask,
    tile_pointer,
)

ALLOCATORS = {"torch.empty", "torch.zeros", "torch.empty_like", "torch.zeros_like", "torch.full"}


class SplitKReduction(PlannedCodemod):
    PATTERN = "split_k_reduction"
    DESCRIPTION = "K split over a program axis, fp32 partials reduced by a generated kernel in a fixed order"

    def plan(self, module: cst.Module) -> None:
        k, body, fn = self.kernel, self.body, self.fn
        if k.autotune is not None:
            self.refuse(f"{k.name} is autotuned: the launcher cannot size K_PER_SPLIT from a tuned K block")
        params = [p.name for p in k.params]
        runtime = [p.name for p in k.params if not p.constexpr]
        for c in m.findall(fn.body, m.Call(func=m.Attribute(value=m.Name("tl"), attr=m.Name(value=m.MatchIfTrue(lambda v: v.startswith("atomic_")))))):
            self.refuse(f"{k.name} updates memory atomically (line {self.line(c)}): split-K would add each partial twice")
        loop = self._k_loop()
        kv = loop.target.value  # type: ignore[attr-defined]
        k_param, bk, form = self._k_range(loop)
        store_stmt, store = self._store(loop)
        acc, out, rows, cols, r, c_off, mask = self._tile(loop, store)
        # names
        i_k = next((n for n in ("i_k", "pid_k", "i_split") if n not in body.bindings and n not in params), None)
        taken = [n for n in ("k_start", "k_end", "partial", "K_PER_SPLIT", "SPLIT_K") if n in body.bindings or n in params]
        if i_k is None or taken:
            self.refuse(f"{k.name} already uses {', '.join(taken) or 'i_k, pid_k and i_split'}")
        axes = pid_axes(body)
        if -1 in axes or not axes:
            self.refuse(f"{k.name} reads program_id on a computed axis" if axes else f"{k.name} reads no program_id")
        axis = max(axes) + 1
        if axis > 2:
            self.refuse(f"{k.name} already uses all three program_id axes")
        # launcher
        la, grid, grid_stmt = only_launch(self, module)
        if not isinstance(grid, cst.Tuple) or len(grid.elements) != axis:
            self.refuse(f"the grid `{code(grid)}` is not a {axis}-D tuple to add the split axis to")
        host = {}
        for p in (out, rows, cols, k_param, bk):
            v = la.value(p)
            if v is None:
                self.refuse(f"the launch does not pass {p}")
            host[p] = code(v)
        out_host = la.value(out)
        made = la.assigns.get(out_host.value, []) if isinstance(out_host, cst.Name) else []
        if len(made) != 1 or not (isinstance(made[0][1], cst.Call) and code(made[0][1].func) in ALLOCATORS):
            self.refuse(f"the output `{host[out]}` is not allocated by {la.host.name.value}: it may not be a contiguous "
                        f"[{rows}, {cols}] tensor for the reduce pass")
        split_k = self.params["split_k"]
        names = ("split_k", "k_per_split", "partial") + (("num_sms",) if split_k == 0 else ())
        taken = [n for n in names if la.assigns.get(n)]
        if taken:
            self.refuse(f"{la.host.name.value} already assigns {', '.join(taken)}")
        positional = [a for a in la.call.args if a.keyword is None]
        if len(positional) > len(runtime):
            self.refuse("the launch passes constexprs positionally: pass them by keyword first")
        top_names = {s.name.value for s in module.body if isinstance(s, (cst.FunctionDef, cst.ClassDef))}
        reduce = "split_k_reduce_kernel" if "split_k_reduce_kernel" not in top_names else f"{k.name.removesuffix('_kernel')}_split_k_reduce_kernel"

        # -- kernel: parameters, split index, K range, masks, store
        first_cx = next(i for i, p in enumerate(k.params) if p.constexpr)
        where = [(params.index(out) + 1, new_param("partial")), (params.index(runtime[-1]) + 1, new_param("K_PER_SPLIT")),
                 (first_cx, new_param("SPLIT_K", "tl.constexpr"))]
        self.replace(fn, lambda u: insert_params(u, where))
        self._split_index(axes[max(axes)][0], i_k, axis)
        self.insert_before(loop, stmts(render(self.PATTERN, "k_range.py.j2", i_k=i_k, k=k_param)))
        it = loop.iter
        if form == "range":
            self.replace(it, lambda u: u.with_changes(args=[u.args[0].with_changes(value=cst.Name("k_start")),
                                                            u.args[1].with_changes(value=cst.Name("k_end")), *u.args[2:]]))
        else:
            self.replace(it, lambda u: u.with_changes(args=[
                u.args[0].with_changes(value=expr(f"k_start // {bk}"), comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))),
                cst.Arg(expr(f"tl.cdiv(k_end, {bk})"), comma=u.args[0].comma), *u.args[1:]]))
        for comp in m.findall(loop.body, m.Comparison()):
            for ct in comp.comparisons:  # type: ignore[attr-defined]
                if isinstance(ct.operator, cst.LessThan) and m.matches(ct.comparator, m.Name(k_param)) and body.depends(comp.left, {kv}):  # type: ignore[attr-defined]
                    self.replace(ct.comparator, cst.Name("k_end"))
        branch = cst.parse_module(render(self.PATTERN, "store.py.j2", rows=rows, cols=cols, reduce=reduce, partial="partial", i_k=i_k,
                                         rows_p=paren(rows), cols_p=paren(cols), r=code(r), c=code(c_off), acc=acc, mask=code(mask))).body[0]

        def split_store(u: cst.SimpleStatementLine) -> cst.If:
            inner = branch.body.with_changes(body=[u.with_changes(leading_lines=[])])  # type: ignore[attr-defined]
            return branch.with_changes(body=inner, leading_lines=u.leading_lines)  # type: ignore[attr-defined]

        self.replace(store_stmt, split_store)
        reduce_fn = stmts(render(self.PATTERN, "reduce_kernel.py.j2", name=reduce))[0]
        self.insert_after(fn, [reduce_fn.with_changes(leading_lines=[cst.EmptyLine(), cst.EmptyLine()])])

        # -- launcher: split count and workspace, grid axis, arguments, reduce pass
        tiles = paren(" * ".join(paren(code(e.value)) for e in grid.elements))
        block = stmts(render(self.PATTERN, "launcher.py.j2", split_k=split_k, k=host[k_param], bk=paren(host[bk]), rows=host[rows],
                             cols=host[cols], out=host[out], tiles=tiles, i_k=i_k))
        self.insert_before(grid_stmt or la.stmt, block)
        self.replace(grid, lambda u: u.with_changes(elements=[*u.elements[:-1], u.elements[-1].with_changes(
            comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))), cst.Element(cst.Name("split_k"))]))
        inserts = []
        if params.index(out) < len(positional):
            inserts.append((params.index(out) + 1, cst.Arg(cst.Name("partial"))))
        else:
            inserts.append((len(la.call.args), kwarg("partial", "partial")))
        if len(positional) == len(runtime):
            inserts.append((len(positional), cst.Arg(cst.Name("k_per_split"))))
        else:
            inserts.append((len(la.call.args), kwarg("K_PER_SPLIT", "k_per_split")))
        first_kw = next((i for i, a in enumerate(la.call.args) if a.keyword is not None and a.keyword.value in params), None)
        if first_kw is None:
            first_kw = max((i + 1 for i, a in enumerate(la.call.args) if a.keyword is None or a.keyword.value in params), default=0)
        inserts.append((first_kw, kwarg("SPLIT_K", "split_k")))
        inserts.sort(key=lambda t: t[0])
        self.replace(la.call, lambda u: insert_args(u, inserts))
        self.keep_width(la.stmt)
        mn = f"{paren(host[rows])} * {paren(host[cols])}"
        self.insert_after(la.stmt, stmts(render(self.PATTERN, "reduce_launch.py.j2", reduce=reduce, mn=mn, out=host[out])))
        if self.facts.imports.get("torch") != "torch":
            AddImportsVisitor.add_needed_import(self.context, "torch")

    # -- reading -----------------------------------------------------------------------
    def _k_loop(self) -> cst.For:
        dots = [lp for lp in m.findall(self.fn.body, m.For()) if m.findall(lp, m.Call(func=m.Attribute(value=m.Name("tl"), attr=m.Name("dot"))))]
        inner = [lp for lp in dots if not any(o is not lp and any(x is o for x in m.findall(lp.body, m.For())) for o in dots)]
        if len(inner) != 1:
            self.refuse(f"{self.kernel.name} has {len(inner) or 'no'} K loop{'s' if len(inner) != 1 else ''} with tl.dot: expected one")
        loop = inner[0]
        if loop not in self.fn.body.body:
            self.refuse(f"the K loop (line {self.line(loop)}) is nested in another block: split it by hand")
        if not isinstance(loop.target, cst.Name):  # type: ignore[attr-defined]
            self.refuse(f"the K loop (line {self.line(loop)}) does not iterate a single index")
        return loop  # type: ignore[return-value]

    def _k_range(self, loop: cst.For) -> tuple[str, str, str]:
        """(K parameter, K block constexpr, "range" | "cdiv") for range(0, K, BK) / range(tl.cdiv(K, BK))."""
        it = loop.iter
        bad = f"the K loop `{code(it)}` (line {self.line(loop)}) is not a simple range over a K parameter"
        if not (isinstance(it, cst.Call) and code(it.func) in ("range", "tl.range")):
            self.refuse(bad)
        pos = [a.value for a in it.args if a.keyword is None]  # type: ignore[union-attr]
        params = {p.name for p in self.kernel.params if not p.constexpr}
        constexprs = set(self.kernel.constexprs)
        if len(pos) == 3 and m.matches(pos[0], m.Integer("0")) and isinstance(pos[1], cst.Name) and isinstance(pos[2], cst.Name):
            if pos[1].value in params and pos[2].value in constexprs:
                return pos[1].value, pos[2].value, "range"
        if len(pos) == 1 and m.matches(pos[0], m.Call(func=m.Attribute(value=m.Name("tl"), attr=m.Name("cdiv")), args=[m.Arg(m.Name()), m.Arg(m.Name())])):
            kk, bb = (a.value.value for a in pos[0].args)  # type: ignore[attr-defined]
            if kk in params and bb in constexprs:
                return kk, bb, "cdiv"
        self.refuse(bad)
        raise AssertionError  # unreachable

    def _store(self, loop: cst.For) -> tuple[cst.SimpleStatementLine, cst.Call]:
        stores = list(self.body.calls("tl.store"))
        if len(stores) != 1:
            self.refuse(f"{self.kernel.name} has {len(stores)} tl.store calls: expected the one output tile store")
        store = stores[0]
        stmt = next((s for s in self.fn.body.body if m.matches(s, m.SimpleStatementLine(body=[m.Expr()])) and s.body[0].value is store), None)  # type: ignore[attr-defined]
        if stmt is None or self.line(stmt) < self.get_metadata(PositionProvider, loop).end.line:
            self.refuse(f"the store on line {self.line(store)} is not a statement of its own after the K loop")
        return stmt, store

    def _tile(self, loop: cst.For, store: cst.Call):
        """(accumulator, output param, rows extent, cols extent, row offset, col offset, mask) of the tile store."""
        body, k = self.body, self.kernel
        args = {a.keyword.value if a.keyword else i: a.value for i, a in enumerate(store.args)}
        ptr, value, mask = args.get(0, args.get("pointer")), args.get(1, args.get("value")), args.get("mask", args.get(2))
        pointers = {p.name for p in k.params if not p.constexpr}
        in_loop = {id(x) for x in m.findall(loop.body, m.Assign() | m.AugAssign())}
        accs = [n for n, bs in body.bindings.items()
                if any(id(b.stmt) in in_loop and m.findall(b.value, m.Call(func=m.Attribute(value=m.Name("tl"), attr=m.Name("dot")))) for b in bs)]
        acc = accs[0] if len(accs) == 1 else None
        inner = value.func.value if m.matches(value, m.Call(func=m.Attribute(attr=m.Name("to")))) else value  # type: ignore[union-attr]
        bases = body.bases(ptr, pointers)
        if len(bases) != 1:
            self.refuse(f"the store on line {self.line(store)} does not write through one output pointer")
        out = next(iter(bases))
        loads = [c for c in body.calls("tl.load") if c.args and out in body.bases(c.args[0].value, pointers)]
        if loads:
            self.refuse(f"the output {out} is accumulated in place (loaded on line {self.line(loads[0])}, stored on line {self.line(store)}): "
                        "split-K partials cannot be added to it twice")
        if acc is None or not m.matches(inner, m.Name(acc)):
            self.refuse(f"the store on line {self.line(store)} writes `{code(inner)}`, not the accumulator {acc or '(none)'}: an epilogue "
                        "on the accumulator must move into the reduce pass, by hand")
        tp, tm = tile_pointer(body, ptr), tile_mask(body, mask)
        dense = (tp is not None and tm is not None and set(tm) == {0, 1} and tp.axes[1].stride == "1"
                 and same(tp.axes[0].offset, tm[0][0]) and same(tp.axes[1].offset, tm[1][0])
                 and isinstance(tm[0][1], cst.Name) and isinstance(tm[1][1], cst.Name) and tp.axes[0].stride == tm[1][1].value
                 and tm[0][1].value in pointers and tm[1][1].value in pointers)
        if not dense:
            self.refuse(f"the store on line {self.line(store)} is not a dense masked [M, N] tile "
                        "(`out + r[:, None] * N + c[None, :]` with mask `r < M`, `c < N`)")
        return acc, out, tm[0][1].value, tm[1][1].value, tm[0][0], tm[1][0], mask  # type: ignore[index,union-attr]

    def _split_index(self, call: cst.Call, i_k: str, axis: int) -> None:
        """Add `i_k = tl.program_id(axis)` next to the statement reading the highest program axis."""
        stmt = next(s for s in m.findall(self.fn.body, m.SimpleStatementLine()) if any(x is call for x in m.findall(s, m.Call())))
        assign = stmt.body[0] if len(stmt.body) == 1 else None  # type: ignore[attr-defined]
        pid = f"tl.program_id({axis})"
        if (isinstance(assign, cst.Assign) and isinstance(assign.targets[0].target, cst.Tuple) and isinstance(assign.value, cst.Tuple)
                and all("tl.program_id" in code(e.value) for e in assign.value.elements)):
            def extend(u: cst.SimpleStatementLine) -> cst.SimpleStatementLine:
                a = u.body[0]
                space = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
                tgt = a.targets[0].target
                tgt = tgt.with_changes(elements=[*tgt.elements[:-1], tgt.elements[-1].with_changes(comma=space), cst.Element(cst.Name(i_k))])
                val = a.value.with_changes(elements=[*a.value.elements[:-1], a.value.elements[-1].with_changes(comma=space), cst.Element(expr(pid))])
                return u.with_changes(body=[a.with_changes(targets=[a.targets[0].with_changes(target=tgt)], value=val)])
            self.replace(stmt, extend)
        else:
            self.insert_after(stmt, [cst.parse_statement(f"{i_k} = {pid}\n")])
