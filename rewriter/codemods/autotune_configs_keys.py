"""Tune a kernel's tile sizes with @triton.autotune, keyed on the launcher's shape arguments.

Decorator: @triton.autotune(configs=[...], key=[...], restore_value=[...]) above
@triton.jit (template autotune.py.j2). The configs are the launcher's own setting
first, then a fixed space (param `space`: small = 4, medium = 8 configs spanning
decode-sized and prefill-sized tiles, hopper = 8 large bf16 tiles for sm_90),
projected onto the kernel's M/N/K block constexprs (BM, BLOCK_M, BLOCK_SIZE_M, ...). The key names every kernel parameter
the launch passes a tensor-shape value to; with `bucket=M` the raw M leaves the
key for a constexpr M_BUCKET = min(next_power_of_2(M), 4096) and M becomes
do_not_specialize. restore_value lists the pointers the kernel both loads and
stores (or updates atomically): timing runs every config on the real arguments.
Launcher: the tuned constexprs, num_warps and num_stages leave the launch, their
assignments go, and a grid that counts tuned tiles becomes `lambda meta: ...`
reading meta["BM"], ...

A block passed as a module-level constant (`BM, BN, BK = 128, 128, 32`) counts
as fixed; the constant goes when nothing else reads it.

Refuses: a kernel already autotuned; a block the launcher computes (from the
inputs or otherwise) instead of fixing it; a block that neither tiles a program
axis nor steps a loop (the kernel may need it to cover a whole dimension); a grid
that is not a tuple built from the blocks (a callable, a tile count computed
elsewhere, a literal that matches several blocks); a block the launcher also uses
for something else; a launch with no shape argument to key on.
"""
from __future__ import annotations

import re

import libcst as cst
import libcst.matchers as m

from patterns.rewriter.edits import PlannedCodemod, block_dims, code, expr, find_launch, insert_params, kwarg, new_param, render, stmts

ROLES = {"M": re.compile(r"B(LOCK_(SIZE_)?)?M"), "N": re.compile(r"B(LOCK_(SIZE_)?)?N"), "K": re.compile(r"B(LOCK_(SIZE_)?)?K")}
# (BM, BN, BK, num_warps, num_stages): decode-sized tiles first, prefill-sized last. Every entry of
# small and medium fits the 227 KB of shared memory of an H100/H200 with fp32 operands.
SPACES = {
    "small": [(16, 64, 64, 4, 4), (64, 64, 32, 4, 4), (128, 128, 32, 4, 4), (128, 128, 64, 8, 3)],
    "medium": [
        (16, 64, 64, 4, 4), (16, 128, 64, 4, 4), (32, 64, 32, 4, 5), (64, 64, 32, 4, 4),
        (64, 128, 32, 4, 4), (128, 64, 32, 4, 4), (128, 128, 32, 4, 4), (128, 128, 64, 8, 3),
    ],
    # large bf16/fp16 GEMMs on Hopper: wgmma-sized tiles, 8 warps, 3-4 stages (up to 192 KB of shared
    # memory with 2-byte operands; with fp32 operands the deepest ones do not fit and the autotuner skips them)
    "hopper": [
        (128, 128, 64, 4, 4), (128, 128, 64, 8, 4), (128, 256, 64, 8, 3), (128, 256, 64, 8, 4),
        (256, 128, 64, 8, 3), (256, 128, 64, 8, 4), (64, 256, 64, 4, 4), (128, 256, 32, 8, 5),
    ],
}
DEFAULT_OPTIONS = {"num_warps": 4, "num_stages": 3}


def _module_ints(module: cst.Module) -> dict[str, tuple[int, cst.SimpleStatementLine]]:
    """Module-level names bound once to an int literal (`BM = 128`, `BM, BN = 128, 64`) and their statements."""
    found: dict[str, list[tuple[int, cst.SimpleStatementLine]]] = {}
    for stmt in module.body:
        if not m.matches(stmt, m.SimpleStatementLine(body=[m.Assign(targets=[m.AssignTarget()])])):
            continue
        tgt, val = stmt.body[0].targets[0].target, stmt.body[0].value  # type: ignore[attr-defined]
        pairs = zip(tgt.elements, val.elements) if isinstance(tgt, cst.Tuple) and isinstance(val, cst.Tuple) else [(tgt, val)]
        for t, v in pairs:
            t, v = getattr(t, "value", t), getattr(v, "value", v)
            if isinstance(t, cst.Name):
                found.setdefault(t.value, []).append((int(v.value) if isinstance(v, cst.Integer) else None, stmt))
    return {name: hits[0] for name, hits in found.items() if len(hits) == 1 and hits[0][0] is not None}


def _role(name: str) -> str | None:
    return next((r for r, rx in ROLES.items() if rx.fullmatch(name)), None)


class AutotuneConfigsKeys(PlannedCodemod):
    PATTERN = "autotune_configs_keys"
    DESCRIPTION = "tile sizes chosen by @triton.autotune, keyed on the launcher's shape arguments"

    def plan(self, module: cst.Module) -> None:
        k = self.kernel
        if k.autotune is not None:
            n = "generated" if k.autotune.generated else str(len(k.autotune.configs))
            self.refuse(f"{k.name} already has @triton.autotune ({n} config{'s' if n != '1' else ''}, key={k.autotune.key}): "
                        "extend its configs and key by hand")
        params = [p.name for p in k.params]
        tuned = [p.name for p in k.params if p.constexpr and _role(p.name)]
        if not tuned:
            self.refuse(f"{k.name} has no M/N/K block constexpr (BM, BLOCK_M, BLOCK_SIZE_M, ...) to tune")
        for b in tuned:
            if b in k.heuristics:
                self.refuse(f"{b} is chosen by @triton.heuristics: tune it there")
        if len(k.launches) != 1:
            self.refuse(f"{k.name} is launched {len(k.launches)}× in this file: the launch and the grid must change with the decorator")
        la = find_launch(self, module, k.launches[0].line, params)
        self.la = la
        consts = _module_ints(module)
        # -- the blocks and the launcher's current setting
        current: dict[str, int] = {}
        host_block: dict[str, str] = {}  # launcher name -> block
        for b in tuned:
            arg = la.by_param.get(b)
            if arg is None:
                self.refuse(f"the launch on line {k.launches[0].line} does not pass {b}")
            if arg.keyword is None:
                self.refuse(f"the launch passes {b} positionally: pass it by keyword first")
            value = la.literal(arg.value)
            if value is None and isinstance(arg.value, cst.Name) and arg.value.value not in la.assigns:
                value = consts.get(arg.value.value, (None, None))[0]  # a module-level tile constant
            if value is None:
                src = arg.value
                if isinstance(src, cst.Name) and la.assigns.get(src.value):
                    stmt = la.assigns[src.value][-1][0]
                    self.refuse(f"{b} is computed by the launcher (`{code(stmt)}`): the kernel may depend on that choice; "
                                "make it a fixed tile or tune it by hand")
                self.refuse(f"{b} is passed as `{code(src)}`, not a fixed tile size")
            current[b] = value
            if isinstance(arg.value, cst.Name):
                host_block[arg.value.value] = b
            if not self._tiles(b):
                self.refuse(f"{b} neither tiles a program axis nor steps a loop: the kernel may need it to cover a whole dimension")
        options = {}
        for opt, default in DEFAULT_OPTIONS.items():
            a = la.options.get(opt)
            value = default if a is None else la.literal(a.value)
            if value is None:
                self.refuse(f"{opt} is computed by the launcher (`{code(a.value)}`): tune it by hand")  # type: ignore[union-attr]
            options[opt] = value
        # -- key: parameters the launch passes a shape to; restore_value: pointers loaded and stored
        key = [p for p in params if p not in tuned and la.value(p) is not None and la.shape_derived(la.value(p))]  # type: ignore[arg-type]
        if not key:
            self.refuse("the launch passes no shape argument to key the tuning on: key=[] would tune once for the first shape")
        bucket = self.params.get("bucket") or ""
        if bucket:
            if bucket not in key:
                self.refuse(f"--param bucket={bucket}: {bucket} is not a shape argument of {k.name} (shape arguments: {', '.join(key)})")
            bucket_name = f"{bucket}_BUCKET"
            if bucket_name in params or la.assigns.get(bucket_name):
                self.refuse(f"{bucket_name} already exists in {k.name} or its launcher")
            key = [p for p in key if p != bucket] + [bucket_name]
        restore = self._inplace(set(params) - set(k.constexprs))
        # -- the grid
        self._plan_grid(la, tuned, current, host_block)
        # -- the launcher: drop the tuned arguments and options, and their now unused assignments
        dropped = set(tuned) | set(DEFAULT_OPTIONS)
        self.replace(la.call, lambda u: _drop_kwargs(u, dropped, bucket and bucket_name, la))
        self.keep_width(la.stmt)
        self._drop_host_names(la, host_block)
        self._drop_module_constants(module, consts, host_block)
        for b, g in self.unfollowed:
            self.refuse(f"the grid `{g}` does not follow {b}: it cannot be rewritten to a lambda over the tuned blocks")
        # -- decorators (and the bucket's constexpr)
        configs = self._configs(tuned, current, options)
        text = render(self.PATTERN, "autotune.py.j2", configs=configs, key=key, restore=restore, q=self.quote)
        deco = cst.parse_module(text + "def _():\n    pass\n").body[0].decorators[0]  # type: ignore[attr-defined]
        fn = self.fn
        jit = fn.decorators[-1] if fn.decorators else None

        def decorate(u: cst.FunctionDef) -> cst.FunctionDef:
            decos = list(u.decorators)
            if bucket:
                decos[-1] = decos[-1].with_changes(decorator=_do_not_specialize(decos[-1].decorator, bucket, self.quote))
                first_cx = next(i for i, p in enumerate(k.params) if p.constexpr)
                u = insert_params(u, [(first_cx, new_param(bucket_name, "tl.constexpr"))])
            lead = decos[0].leading_lines
            decos[0] = decos[0].with_changes(leading_lines=[])
            return u.with_changes(decorators=[deco.with_changes(leading_lines=lead), *decos])

        if jit is None:  # pragma: no cover - facts only list decorated kernels
            self.refuse(f"{k.name} has no decorator")
        self.replace(fn, decorate)
        if bucket:
            size = code(la.value(bucket))  # type: ignore[arg-type]
            block = stmts(render(self.PATTERN, "bucket.py.j2", name=bucket_name, size=size))
            self.insert_before(self.grid_stmt or la.stmt, block)

    # -- checks ------------------------------------------------------------------------
    def _tiles(self, block: str) -> bool:
        k = self.kernel
        if any(re.search(rf"\b{block}\b", lp.iter) for lp in k.loops):
            return True
        for _, text in k.assigns.values():
            for mt in re.finditer(rf"\b(\w+)\s*\*\s*{block}\b|\b{block}\s*\*\s*(\w+)\b", text):
                if (mt.group(1) or mt.group(2)) in k.pid_deps:
                    return True
        return False

    def _inplace(self, pointers: set[str]) -> list[str]:
        loaded, stored = set(), set()
        for c in self.body.calls("tl.load"):
            loaded |= self.body.bases(c.args[0].value, pointers) if c.args else set()
        for c in self.body.calls("tl.store"):
            stored |= self.body.bases(c.args[0].value, pointers) if c.args else set()
        for c in m.findall(self.fn.body, m.Call(func=m.Attribute(value=m.Name("tl"), attr=m.Name(value=m.MatchIfTrue(lambda v: v.startswith("atomic_")))))):
            hit = self.body.bases(c.args[0].value, pointers)  # type: ignore[attr-defined]
            loaded |= hit
            stored |= hit
        return [p.name for p in self.kernel.params if p.name in loaded & stored]

    # -- the grid ----------------------------------------------------------------------
    def _plan_grid(self, la, tuned: list[str], current: dict[str, int], host_block: dict[str, str]) -> None:
        grid = la.grid
        self.grid_stmt = None
        if isinstance(grid, cst.Name):
            found = la.assigns.get(grid.value, [])
            if len(found) != 1 or not isinstance(found[0][1], cst.Tuple):
                how = f"`{code(found[0][0])}`" if len(found) == 1 else f"assigned {len(found)}×"
                self.refuse(f"the grid `{grid.value}` ({how}) cannot be rewritten to a lambda over the tuned blocks")
            self.grid_stmt, grid = found[0]
        elif not isinstance(grid, cst.Tuple):
            self.refuse(f"the grid `{code(grid)}` cannot be rewritten to a lambda over the tuned blocks")
        dims = block_dims(self.body, set(tuned))
        host_to_param = {a.value.value: p for p, a in la.by_param.items() if isinstance(a.value, cst.Name)}
        used: set[str] = set()
        q = self.quote
        codemod = self

        class Meta(cst.CSTTransformer):
            def leave_Call(self, o: cst.Call, u: cst.Call) -> cst.Call:
                if not (m.matches(o.func, m.Attribute(value=m.Name("triton") | m.Name("tl"), attr=m.Name("cdiv"))) and len(o.args) == 2):
                    return u
                lit = o.args[1].value
                if not isinstance(lit, cst.Integer):
                    return u
                dim = host_to_param.get(o.args[0].value.value) if isinstance(o.args[0].value, cst.Name) else None
                fits = [b for b in dims.get(dim or "", set()) if current[b] == int(lit.value)]
                if len(fits) != 1:
                    same = [b for b in tuned if current[b] == int(lit.value)]
                    if same:
                        codemod.refuse(f"cannot tell which block `{code(o)}` counts ({'/'.join(same)} = {lit.value}): "
                                       "write the grid with the block names first")
                    return u
                used.add(fits[0])
                return u.with_changes(args=[u.args[0], u.args[1].with_changes(value=expr(f"meta[{q}{fits[0]}{q}]"))])

            def leave_Name(self, o: cst.Name, u: cst.Name) -> cst.BaseExpression:
                b = host_block.get(o.value)
                if b is None:
                    return u
                used.add(b)
                return expr(f"meta[{q}{b}{q}]")

        new = grid.visit(Meta())
        # refused after the launcher's other uses of the blocks, which explain it better
        self.unfollowed = [(b, code(grid)) for b in tuned if b not in used and self._tiles_program(b)]
        lam = cst.Lambda(params=cst.Parameters([cst.Param(cst.Name("meta"))]), body=new)
        if not used:
            return  # the grid does not count tuned tiles (a K block, a KV block): it stays as it is
        if self.grid_stmt is not None:
            def regrid(u: cst.SimpleStatementLine) -> cst.SimpleStatementLine:
                u = u.with_changes(body=[u.body[0].with_changes(value=lam)])
                if u.trailing_whitespace.comment is None:
                    u = u.with_changes(trailing_whitespace=cst.TrailingWhitespace(
                        whitespace=cst.SimpleWhitespace("  "), comment=cst.Comment("# noqa: E731"), newline=u.trailing_whitespace.newline))
                return u
            self.replace(self.grid_stmt, regrid)
        elif "grid" in la.assigns or m.findall(la.host.body, m.Name("grid")):
            self.replace(grid, lambda u: lam)
        else:  # a named grid reads better than a lambda inside the subscript
            line = cst.SimpleStatementLine(
                [cst.Assign([cst.AssignTarget(cst.Name("grid"))], lam)],
                trailing_whitespace=cst.TrailingWhitespace(whitespace=cst.SimpleWhitespace("  "), comment=cst.Comment("# noqa: E731")),
            )
            self.insert_before(la.stmt, [line])
            self.replace(grid, lambda u: cst.Name("grid"))

    def _tiles_program(self, block: str) -> bool:
        k = self.kernel
        for _, text in k.assigns.values():
            for mt in re.finditer(rf"\b(\w+)\s*\*\s*{block}\b|\b{block}\s*\*\s*(\w+)\b", text):
                if (mt.group(1) or mt.group(2)) in k.pid_deps:
                    return True
        return False

    def _drop_module_constants(self, module: cst.Module, consts: dict, host_block: dict[str, str]) -> None:
        """Remove a module-level `BM, BN, BK = 128, 128, 32` whose names now only the tuned kernel and launch read."""
        stmts = {id(stmt): stmt for name, (_, stmt) in consts.items() if name in host_block and name not in self.la.assigns}
        grid_nodes = {id(n) for n in m.findall(self.grid_stmt or self.la.grid, m.Name())}
        launch_nodes = {id(n) for n in m.findall(self.la.call, m.Name())}
        for stmt in stmts.values():
            names = {n.value for n in m.findall(stmt, m.Name())}
            if not names <= set(host_block):
                continue  # it also defines something the rewrite does not tune
            for top in module.body:
                if top is stmt or top is self.fn:
                    continue
                if any(id(n) not in grid_nodes | launch_nodes for n in m.findall(top, m.Name(m.MatchIfTrue(lambda v: v in names)))):
                    break
            else:
                self.remove(stmt)
                # the blank lines that met where it was stay two, as between top-level definitions
                self.replace(self.fn, lambda u: u.with_changes(leading_lines=[cst.EmptyLine(), cst.EmptyLine()])
                             if all(ln.comment is None for ln in u.leading_lines) else u)

    def _drop_host_names(self, la, host_block: dict[str, str]) -> None:
        """Remove the launcher's assignments of the tuned blocks; refuse if it uses them elsewhere."""
        grid_nodes = {id(n) for n in m.findall(self.grid_stmt or la.grid, m.Name())}
        launch_nodes = {id(n) for n in m.findall(la.call, m.Name())}
        targets: dict[int, cst.SimpleStatementLine] = {}
        for name in host_block:
            for stmt, _ in la.assigns.get(name, []):
                targets[id(stmt)] = stmt
        assign_nodes = {id(n) for s in targets.values() for n in m.findall(s, m.Name())}
        for name in host_block:
            for n in m.findall(la.host.body, m.Name(name)):
                if id(n) in grid_nodes | launch_nodes | assign_nodes:
                    continue
                line = next(s for s in m.findall(la.host.body, m.SimpleStatementLine() | m.For() | m.If())
                            if any(x is n for x in m.findall(s, m.Name(name))))
                self.refuse(f"{name} is also used on line {self.line(line)} (`{code(line).splitlines()[0]}`): "
                            "the tuned value is not known to the launcher")
        for stmt in targets.values():
            if len(stmt.body) != 1 or not isinstance(stmt.body[0], cst.Assign) or len(stmt.body[0].targets) != 1:
                self.refuse(f"cannot remove the block sizes from `{code(stmt)}`")
            assign = stmt.body[0]
            tgt, val = assign.targets[0].target, assign.value
            if isinstance(tgt, cst.Name):
                self.remove(stmt)
                continue
            keep = [i for i, el in enumerate(tgt.elements) if not (isinstance(el.value, cst.Name) and el.value.value in host_block)]
            if not keep:
                self.remove(stmt)
            elif isinstance(tgt, cst.Tuple) and isinstance(val, cst.Tuple) and len(val.elements) == len(tgt.elements):
                self.replace(stmt, lambda u, keep=keep: u.with_changes(body=[_keep_pairs(u.body[0], keep)]))
            else:
                self.refuse(f"cannot remove the block sizes from `{code(stmt)}`")

    def _configs(self, tuned: list[str], current: dict[str, int], options: dict[str, int]) -> list[dict]:
        roles = {b: _role(b) for b in tuned}
        out, seen = [], set()
        rows = [(current, options["num_warps"], options["num_stages"], "the launcher's fixed setting")]
        for bm, bn, bk, w, s in SPACES[self.params.get("space") or "small"]:
            size = {"M": bm, "N": bn, "K": bk}
            rows.append(({b: size[roles[b]] for b in tuned}, w, s, ""))  # type: ignore[index]
        for blocks, w, s, note in rows:
            ident = (tuple(blocks[b] for b in tuned), w, s)
            if ident in seen:
                continue
            seen.add(ident)
            out.append({"blocks": [(b, blocks[b]) for b in tuned], "num_warps": w, "num_stages": s, "note": note})
        return out


def _drop_kwargs(call: cst.Call, names: set[str], bucket: str, la) -> cst.Call:
    args = list(call.args)
    keep = [a for a in args if not (a.keyword and a.keyword.value in names)]
    if keep[-1] is not args[-1]:
        keep[-1] = keep[-1].with_changes(comma=args[-1].comma)
    if bucket:
        last = keep[-1]
        keep[-1] = last.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
        keep.append(kwarg(bucket, bucket).with_changes(comma=last.comma))
    return call.with_changes(args=keep)


def _keep_pairs(assign: cst.Assign, keep: list[int]) -> cst.Assign:
    tgt, val = assign.targets[0].target, assign.value
    def pick(t: cst.Tuple) -> cst.BaseExpression:
        els = [t.elements[i] for i in keep]
        if len(els) == 1:
            return els[0].value
        els[-1] = els[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        return t.with_changes(elements=els)
    return assign.with_changes(targets=[assign.targets[0].with_changes(target=pick(tgt))], value=pick(val))  # type: ignore[arg-type]


def _do_not_specialize(deco: cst.BaseExpression, name: str, q: str) -> cst.BaseExpression:
    item = f"{q}{name}{q}"
    if isinstance(deco, cst.Call):
        existing = next((a for a in deco.args if a.keyword and a.keyword.value == "do_not_specialize"), None)
        if existing is not None and isinstance(existing.value, (cst.List, cst.Tuple)):
            if name in {getattr(e.value, "evaluated_value", None) for e in existing.value.elements}:
                return deco
            new = existing.value.with_changes(elements=[*existing.value.elements[:-1],
                                                        existing.value.elements[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))),
                                                        cst.Element(expr(item))]) if existing.value.elements else expr(f"[{item}]")
            return deco.with_changes(args=[a.with_changes(value=new) if a is existing else a for a in deco.args])
        return deco.with_changes(args=[*deco.args[:-1], *([deco.args[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))] if deco.args else []),
                                       kwarg("do_not_specialize", f"[{item}]")])
    return cst.Call(func=deco, args=[kwarg("do_not_specialize", f"[{item}]")])
