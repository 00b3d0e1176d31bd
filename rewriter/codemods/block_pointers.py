"""Turn tiled pointer-arithmetic loads and stores into block pointers (tl.make_block_ptr).

Every 2-D access `tl.load(base + r[:, None] * s_r + c[None, :] * s_c, mask=..., other=0)`
of the kernel, where r and c are `start + tl.arange(0, B)` offsets and the mask is
`(r < R)[:, None] & (c < C)[None, :]`, becomes
`p = tl.make_block_ptr(base, (R, C), (s_r, s_c), (start_r, start_c), (B_r, B_c), order)`
and `tl.load(p, boundary_check=(0, 1), padding_option="zero")` (a store likewise).
In a loop whose index moves an offset (`i_k * BK + ...`, `k + ...`) the block
pointer is made once before the loop at the first iteration's offset and
`p = tl.advance(p, ...)` closes the loop body; a loop index nothing reads any
more becomes `_`. A pointer held in a name (`p_c = c + ...`, loaded and stored)
becomes that name's block pointer. Offsets, masks and loop indices the new code
no longer reads are deleted. An axis with no mask must be a whole `tl.arange(0, D)`
(its extent is D). A tile offset computed from an int64 program id is cast to
int32, the only offset width block pointers take. Results are bit-identical.

Refuses: any 2-D access it cannot express that way (a gather through loaded
indices, a mask that is not one bound per axis, an offset the loop moves by more
than its index, padding other than 0 or NaN, an unmasked partial axis), a loop
with `continue`/`break` around an advanced pointer, and names p_<base> taken.
Block pointers need Triton <= 3.8 (3.9 removed them): the code is for the GPU
machine's Triton 3.6.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import libcst as cst
import libcst.matchers as m

from patterns.rewriter.edits import PlannedCodemod, code, expr, kwarg, names_in, paren, tile_mask, tile_pointer, unparen

_PURE = {"tl.arange", "tl.cdiv", "tl.minimum", "tl.maximum", "min", "max"}


@dataclass
class _Access:
    call: cst.Call
    stmt: cst.BaseStatement
    loop: cst.For | None
    name: str
    make: str = ""  # `tl.make_block_ptr(...)` source
    advance: str = ""  # `(0, BK)` when the loop moves the tile
    keep: list[cst.Arg] = field(default_factory=list)
    checks: str = ""
    padding: str = ""
    bound_by: cst.SimpleStatementLine | None = None  # `p_c = c + ...`: rewritten in place
    reads: set[str] = field(default_factory=set)
    dropped: list[cst.CSTNode] = field(default_factory=list)  # pointer, mask and other arguments that go


class BlockPointers(PlannedCodemod):
    PATTERN = "block_pointers"
    DESCRIPTION = "tiled pointer-arithmetic loads and stores as tl.make_block_ptr + tl.advance + boundary_check"

    def plan(self, module: cst.Module) -> None:
        k, body, fn = self.kernel, self.body, self.fn
        self.loops = list(m.findall(fn.body, m.For()))
        accesses: list[_Access] = []
        for call in body.calls("tl.load", "tl.store"):
            acc = self._access(call)
            if acc is not None:
                accesses.append(acc)
        if not accesses:
            self.refuse(f"{k.name} has no 2-D pointer-arithmetic tile load or store")
        # names: one block pointer per tile; a pointer held in a name keeps it
        by_name: dict[str, _Access] = {}
        for a in accesses:
            other = by_name.get(a.name)
            if other is not None and (other.make != a.make or other.loop is not a.loop or other.bound_by is not a.bound_by):
                self.refuse(f"two different tiles would both be named {a.name}: rename by hand")
            if other is None and a.bound_by is None and (a.name in body.bindings or k.param(a.name)):
                self.refuse(f"{k.name} already uses the name {a.name}")
            by_name.setdefault(a.name, a)
        # -- edits: the calls, the block pointers, the advances
        replaced: list[cst.CSTNode] = []
        new_reads: Counter = Counter()
        advances: dict[int, list[str]] = {}
        for a in accesses:
            self.replace(a.call, lambda u, a=a: _block_call(u, a))
            replaced += a.dropped
        protected = {id(a.bound_by) for a in accesses if a.bound_by is not None}
        for name, a in by_name.items():
            stmt = cst.parse_statement(f"{name} = {a.make}\n")
            new_reads.update(names_in(stmt.body[0].value))  # type: ignore[attr-defined]
            new_reads.update({name})  # the new tl.load/tl.store calls read it
            if a.bound_by is not None:
                self.replace(a.bound_by, lambda u, s=stmt: s.with_changes(leading_lines=u.leading_lines, trailing_whitespace=u.trailing_whitespace))
                replaced.append(a.bound_by.body[0].value)  # type: ignore[attr-defined]
            elif a.advance or (a.loop is not None and not (a.reads & self._assigned_in(a.loop))):
                self.insert_before(a.loop, [stmt])
                if a.advance:
                    advances.setdefault(id(a.loop), []).append(f"{name} = tl.advance({name}, {a.advance})")
                    new_reads.update({name})
            else:
                self.insert_before(a.stmt, [stmt])
        for loop in self.loops:
            adv = advances.get(id(loop))
            if adv:
                self.replace(loop, lambda u, adv=adv: u.with_changes(body=u.body.with_changes(
                    body=[*u.body.body, *(cst.parse_statement(s + "\n") for s in adv)])))
        self._dead_code(replaced, new_reads, protected)

    # -- one access ------------------------------------------------------------------------
    def _access(self, call: cst.Call) -> _Access | None:
        body, k = self.body, self.kernel
        kind = "load" if code(call.func) == "tl.load" else "store"
        what = f"the {kind} on line {self.line(call)}"
        if not call.args or call.args[0].keyword is not None:
            return None
        ptr = call.args[0].value
        tp = tile_pointer(body, ptr)
        if tp is None:
            return None if not self._is_2d(ptr) else self.refuse(f"{what} is 2-D but not `base + r[:, None] * s_r + c[None, :] * s_c`")
        kw = {a.keyword.value: a.value for a in call.args if a.keyword}
        pos = [a.value for a in call.args if a.keyword is None]
        mask = kw.get("mask", pos[2] if kind == "store" and len(pos) > 2 else pos[1] if kind == "load" and len(pos) > 1 else None)
        other = kw.get("other", pos[2] if kind == "load" and len(pos) > 2 else None)
        pointers = {p.name for p in k.params if not p.constexpr}
        loaded = set(k.loaded)
        for ax in (0, 1):
            used = names_in(tp.axes[ax].offset) | names_in(expr(tp.axes[ax].stride))
            gathered = sorted(n for n in used if n in loaded)
            if gathered:
                self.refuse(f"{what} reads rows gathered through `{gathered[0]}`, loaded from memory: not a tile")
        if not (isinstance(tp.base, cst.Name) and (tp.base.value in pointers or body.bases(tp.base, pointers))):
            self.refuse(f"{what} is based on `{code(tp.base)}`, not a pointer parameter")
        tm = tile_mask(body, mask)
        if tm is None:
            self.refuse(f"{what} has a mask that is not one bound per axis (`{code(mask)}`): boundary_check cannot express it")  # type: ignore[arg-type]
        loop = self._loop_of(call)
        bound_by = None
        name = f"p_{code(tp.base).removesuffix('_ptr')}"
        if isinstance(ptr, cst.Name):
            b = body.bindings.get(ptr.value, [])
            if len(b) == 1 and b[0].line is not None and len(b[0].line.body) == 1:
                # the named pointer becomes the block pointer where it is assigned, with the offsets of then
                bound_by, name, loop = b[0].line, ptr.value, None
        shape, starts, blocks, advance, checks = [], [], [], [], []
        for ax in (0, 1):
            off = tp.axes[ax].offset
            parts = self._offset(off)
            if parts is None:
                self.refuse(f"{what}: the axis-{ax} offset `{code(off)}` is not `start + tl.arange(0, B)`")
            terms, block = parts
            if ax in tm:
                if unparen(code(tm[ax][0])) != unparen(code(off)) and self._offset(tm[ax][0]) != parts:
                    self.refuse(f"{what} masks axis {ax} with `{code(tm[ax][0])}`, not its offset `{code(off)}`")
                shape.append(unparen(code(tm[ax][1])))
                checks.append(str(ax))
            elif not terms:
                shape.append(block)  # a whole tl.arange(0, D) axis: the extent is D
            else:
                self.refuse(f"{what}: axis {ax} (`{code(off)}`) is not masked, so its extent is unknown")
            start, step = self._start(terms, loop, what)
            starts.append(start)
            advance.append(step)
            blocks.append(block)
        starts = [self._int32(st) for st in starts]
        strides = [tp.axes[0].stride, tp.axes[1].stride]
        order = "(0, 1)" if strides[0] == "1" and strides[1] != "1" else "(1, 0)"
        make = (f"tl.make_block_ptr({code(tp.base)}, ({', '.join(shape)}), ({', '.join(strides)}), ({', '.join(starts)}), "
                f"({', '.join(blocks)}), {order})")
        padding = ""
        if kind == "load" and other is not None:
            text = unparen(code(other))
            if text in ("0", "0.0", "0.", "0.0e0"):
                padding = self.q("zero")
            elif text in ('float("nan")', "float('nan')"):
                padding = self.q("nan")
            else:
                self.refuse(f"{what} pads with other={text}: block pointers pad with zero or NaN only")
        adv = "" if advance == ["0", "0"] else f"({', '.join(advance)})"
        if adv and loop is not None and (m.findall(loop.body, m.Continue()) or m.findall(loop.body, m.Break())):
            self.refuse(f"the loop on line {self.line(loop)} has continue/break: tl.advance at its end would be skipped")
        if adv and loop is not None and names_in(expr(make)) & (self._assigned_in(loop) - {loop.target.value}):  # type: ignore[attr-defined]
            self.refuse(f"{what}: its tile depends on values the loop on line {self.line(loop)} changes")
        keep = [a for a in call.args[1 if kind == "load" else 2:] if a.keyword is None or a.keyword.value not in ("mask", "other")]
        keep = [a for a in keep if a.keyword is not None]
        stmt = self._statement_of(call)
        return _Access(call, stmt, loop, name, make, adv, keep, f"({', '.join(checks)}{',' if len(checks) == 1 else ''})" if checks else "",
                       padding, bound_by, names_in(expr(make)), [x for x in (ptr, mask, other) if x is not None])

    def _int32(self, start: str) -> str:
        """Block pointers take 32-bit offsets: drop an int64 cast in the offset, or cast an int64 index back."""
        if start == "0":
            return start

        class Uncast(cst.CSTTransformer):
            def leave_Call(self, o: cst.Call, u: cst.Call) -> cst.BaseExpression:
                if m.matches(u, m.Call(func=m.Attribute(attr=m.Name("to")), args=[m.Arg(m.Attribute(value=m.Name("tl"), attr=m.Name("int64")))])):
                    return u.func.value  # type: ignore[attr-defined]
                return u

        start = code(expr(start).visit(Uncast()))
        return f"{paren(start)}.to(tl.int32)" if "tl.int64" in code(self.body.expand(expr(start))) else start

    def _is_2d(self, ptr: cst.BaseExpression) -> bool:
        e = self.body.expand(ptr)
        return bool(m.findall(e, m.Subscript(slice=[m.SubscriptElement(), m.SubscriptElement()])))

    def _offset(self, node: cst.BaseExpression, depth: int = 6) -> tuple[list[str], str] | None:
        """(start terms, B) of `start + tl.arange(0, B)`, through singly-assigned names."""
        node = node.with_changes(lpar=[], rpar=[])
        if m.matches(node, m.Call(func=m.Attribute(value=m.Name("tl"), attr=m.Name("arange")), args=[m.Arg(m.Integer("0")), m.Arg()])):
            return [], unparen(code(node.args[1].value))  # type: ignore[attr-defined]
        if isinstance(node, cst.Name) and depth and self.body.single(node.value) is not None:
            inner = self._offset(self.body.single(node.value), depth - 1)  # type: ignore[arg-type]
            if inner is not None:
                return inner
            return [node.value], ""
        if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Add):
            left, right = self._offset(node.left, depth), self._offset(node.right, depth)
            if left is None or right is None or (left[1] and right[1]):
                return None
            return left[0] + right[0], left[1] or right[1]
        return [unparen(code(node))], ""

    def _start(self, terms: list[str], loop: cst.For | None, what: str) -> tuple[str, str]:
        """(offset at the loop's first iteration, step per iteration) of an axis's start terms."""
        if not terms:
            return "0", "0"
        if loop is None or not isinstance(loop.target, cst.Name):
            return " + ".join(terms), "0"
        var = loop.target.value
        inside = self._assigned_in(loop)
        moving = [t for t in terms if names_in(expr(t)) & inside]
        if not moving:
            return " + ".join(terms), "0"
        it = loop.iter
        pos = [a.value for a in it.args if a.keyword is None] if isinstance(it, cst.Call) and code(it.func) in ("range", "tl.range") else None  # type: ignore[union-attr]
        if not pos or len(moving) != 1:
            self.refuse(f"{what}: the loop on line {self.line(loop)} moves its offset in a way tl.advance cannot follow")
        first, step = ("0", "1") if len(pos) == 1 else (code(pos[0]), code(pos[2]) if len(pos) == 3 else "1")
        t = expr(moving[0])
        scale = None
        if m.matches(t, m.Name(var)):
            scale = "1"
        elif isinstance(t, cst.BinaryOperation) and isinstance(t.operator, cst.Multiply):
            for a, b in ((t.left, t.right), (t.right, t.left)):
                if m.matches(a, m.Name(var)) and not (names_in(b) & inside):
                    scale = code(b)
        if scale is None:
            self.refuse(f"{what}: the offset term `{moving[0]}` is not the loop index times a constant: tl.advance cannot follow it")
        at_first = "0" if first == "0" else (first if scale == "1" else f"{first} * {scale}")
        per_iter = scale if step == "1" else (step if scale == "1" else f"{step} * {scale}")
        rest = [t for t in terms if t is not moving[0]] + ([] if at_first == "0" else [at_first])
        return (" + ".join(rest) or "0"), per_iter

    def _assigned_in(self, loop: cst.For) -> set[str]:
        out = set()
        for t in m.findall(loop, m.AssignTarget() | m.AugAssign() | m.For()):
            out |= names_in(t.target)  # type: ignore[attr-defined]
        return out

    def _loop_of(self, node: cst.CSTNode) -> cst.For | None:
        inner = None
        for lp in self.loops:
            if any(x is node for x in m.findall(lp.body, m.Call() | m.SimpleStatementLine())):
                inner = lp  # later loops in pre-order are nested deeper
        return inner

    def _statement_of(self, call: cst.Call) -> cst.SimpleStatementLine:
        for s in m.findall(self.fn.body, m.SimpleStatementLine()):
            if any(x is call for x in m.findall(s, m.Call())):
                return s  # type: ignore[return-value]
        self.refuse(f"the call on line {self.line(call)} is not in a simple statement")
        raise AssertionError  # unreachable

    # -- dead offsets and masks --------------------------------------------------------
    def _dead_code(self, replaced: list[cst.CSTNode], new_reads: Counter, protected: set[int]) -> None:
        gone = {id(n) for r in replaced for n in m.findall(r, m.Name())} | {id(r) for r in replaced}
        removed: set[int] = set()
        targets = {id(n) for t in m.findall(self.fn.body, m.AssignTarget() | m.For()) for n in m.findall(t.target, m.Name())}  # type: ignore[attr-defined]
        attrs = {id(a.attr) for a in m.findall(self.fn.body, m.Attribute())}
        kws = {id(a.keyword) for a in m.findall(self.fn.body, m.Arg()) if a.keyword}  # type: ignore[attr-defined]
        lines = list(m.findall(self.fn.body, m.SimpleStatementLine()))
        dropped: dict[int, set[str]] = {}
        all_names = list(m.findall(self.fn.body, m.Name()))
        while True:
            reads: Counter = Counter(new_reads)
            skip = gone | targets | attrs | kws
            for s_ in lines:
                if id(s_) in removed:
                    skip = skip | {id(n) for n in m.findall(s_, m.Name())}
            for n in all_names:
                if id(n) not in skip:
                    reads[n.value] += 1  # type: ignore[attr-defined]
            changed = False
            for s in lines:
                if id(s) in removed | protected or not m.matches(s, m.SimpleStatementLine(body=[m.Assign(targets=[m.AssignTarget()])])):
                    continue
                assign = s.body[0]  # type: ignore[attr-defined]
                tgt, val = assign.targets[0].target, assign.value
                if {code(c.func) for c in m.findall(val, m.Call()) if not m.matches(c.func, m.Attribute(attr=m.Name("to")))} - _PURE:
                    continue
                names = [tgt] if isinstance(tgt, cst.Name) else [e.value for e in getattr(tgt, "elements", [])]
                if not all(isinstance(n, cst.Name) for n in names):
                    continue
                dead = {n.value for n in names if reads[n.value] == 0} - dropped.get(id(s), set())  # type: ignore[attr-defined]
                if not dead:
                    continue
                dropped.setdefault(id(s), set()).update(dead)
                if len(dropped[id(s)]) == len(names):
                    removed.add(id(s))
                    self.remove(s)
                    gone |= {id(n) for n in m.findall(val, m.Name())}
                elif isinstance(val, cst.Tuple) and len(val.elements) == len(names):
                    keep = [i for i, n in enumerate(names) if n.value not in dropped[id(s)]]  # type: ignore[attr-defined]
                    gone |= {id(n) for i, e in enumerate(val.elements) if i not in keep for n in m.findall(e, m.Name())}
                else:
                    continue
                changed = True
            if not changed:
                break
        for s in lines:
            d = dropped.get(id(s))
            if d and id(s) not in removed:
                assign = s.body[0]  # type: ignore[attr-defined]
                names = [e.value.value for e in assign.targets[0].target.elements]
                keep = [i for i, n in enumerate(names) if n not in d]
                self.replace(s, lambda u, keep=keep: u.with_changes(body=[_keep(u.body[0], keep)]))
        # loop indices nothing reads any more
        for lp in self.loops:
            if isinstance(lp.target, cst.Name) and reads[lp.target.value] == 0 and lp.target.value != "_":
                self.replace(lp.target, cst.Name("_"))


def _block_call(u: cst.Call, a: _Access) -> cst.Call:
    store = code(u.func) == "tl.store"
    args = [cst.Arg(cst.Name(a.name))]
    if store:
        value = next((x for x in u.args if x.keyword and x.keyword.value == "value"), None) or [x for x in u.args if x.keyword is None][1]
        args.append(cst.Arg(value.value))
    kept = {x.keyword.value for x in a.keep}  # type: ignore[union-attr]
    extra = [x for x in u.args if x.keyword and x.keyword.value in kept]
    if a.checks:
        extra.insert(0, kwarg("boundary_check", a.checks))
    if a.padding:
        extra.insert(1 if a.checks else 0, kwarg("padding_option", a.padding))
    out = [*args, *extra]
    space = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    out = [x.with_changes(comma=space) for x in out[:-1]] + [out[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)]
    return u.with_changes(args=out)


def _keep(assign: cst.Assign, keep: list[int]) -> cst.Assign:
    tgt, val = assign.targets[0].target, assign.value

    def pick(t):
        els = [t.elements[i] for i in keep]
        if len(els) == 1:
            return els[0].value
        els[-1] = els[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        return t.with_changes(elements=els)

    return assign.with_changes(targets=[assign.targets[0].with_changes(target=pick(tgt))], value=pick(val))
