"""GQA head grouping: one program per KV head serves the G query heads that share it.

Kernel: the query-head program index `i_hq` (a program_id axis of its own, or
`i_bh % HQ` of a flat `B * HQ` axis) and its KV head `i_hk = i_hq // G` (or
`// (HQ // HK)`) become one KV-head index: the program axis now counts KV heads,
and `o_hq = i_hk * G + tl.arange(0, BG)` with `m_g = tl.arange(0, BG) < G` holds
the group's query heads, BG = max(block_h, next_power_of_2(G)) rows (block_h,
default 16: tl.dot needs 16; the padded rows are masked). Every value that depended on the query
head gains a leading [BG] axis; nothing else changes shape, so each K and V tile
is loaded once for the group:

- row indices built from it (`i_bh`, `i_bh * NUM_SPLITS + i_s`) become [BG]
  vectors renamed `o_*`; loads and stores that combine them with a [BD] offset
  broadcast rows `[:, None]` and columns `[None, :]` and are masked by `m_g`;
- a scalar per head (running max and sum) starts as a [BG] vector, a [BD] vector
  (q, the accumulator) as a [BG, BD] tile;
- `tl.sum(b_k * b_q[None, :], 1)` (either operand order) becomes
  `tl.dot(b_q, tl.trans(b_k))` and `tl.sum(b_p[:, None] * b_v, 0)` becomes
  `tl.dot(b_p, b_v)`; other reductions over a per-head value move to axis + 1;
- in an elementwise expression a per-head value of lower rank than the result is
  broadcast `x[:, None]` (`b_acc * b_alpha[:, None]`, `b_acc / b_l[:, None]`), a
  shared [N] or [D] vector `x[None, :]` (`tl.where(m_n[None, :], ...)`).

Launcher: the grid axis that counted query heads counts KV heads (`(B, HQ)` ->
`(B, HKV)`, `B * HQ` -> `B * HK`); BG is computed before the launch and passed
with G when the kernel had no group-size parameter; a dot block chosen as
`triton.next_power_of_2(x)` becomes `max(16, ...)`. When another grid axis is
sized on the host from the old head count (the split-KV rule
`triton.cdiv(64 * sms, B * HQ)`), that count becomes the new axis's extent:
the rule sizes the split from the programs the grid actually has. Buffers
sized by query rows (o_part) are left alone, and so are other kernels of the
file (a split-KV merge keeps one program per query head). K/V stay in the dtype
the kernel converts them to: fp32 operands run tl.dot in TF32 on the GPU.

Refuses: no `i_hk = i_hq // G` query-head to KV-head mapping (MHA, group size
unknown); a kernel that already calls tl.dot; three program_id axes; a
per-head value that is a 2-D tile (an accumulator that is not a [BD] vector);
K/V tiles not converted with `.to(tl.float32)`; control flow, loop bounds or
K/V addresses that depend on the query head; a head axis the grid does not
size as the query-head count; a launch that does not pass the head counts.
"""
from __future__ import annotations

import re

import libcst as cst
import libcst.matchers as m

from patterns.rewriter.edits import (
    PlannedCodemod, code, dotted, expr, find_launch, insert_args, insert_params, kwarg, names_in, new_param, paren, pid_call, same,
    stmts, unparen,
)

# calls whose result has the broadcast shape of their arguments
ELEMENTWISE = {
    "tl.exp", "tl.exp2", "tl.log", "tl.log2", "tl.sqrt", "tl.rsqrt", "tl.abs", "tl.maximum", "tl.minimum", "tl.where", "tl.sigmoid",
    "tl.fma", "tl.cast", "tl.fdiv", "tl.div_rn", "tl.clamp", "tl.erf", "tl.cos", "tl.sin", "tl.floor", "tl.ceil", "tl.math.exp",
    "tl.math.exp2", "tl.math.log", "tl.math.log2",
}
REDUCTIONS = {"tl.sum", "tl.max", "tl.min"}
NEW_NAMES = ("BG", "m_g")
MIN_DOT = 16  # tl.dot's smallest M, N and K
SHAPE_NOTE = re.compile(r"#\s*\[([^\]]*)\]")


def _pairs(small: cst.BaseSmallStatement) -> list[tuple[cst.BaseExpression, cst.BaseExpression]]:
    """(target, value) pairs of `a = x` or `a, b = x, y`."""
    if not isinstance(small, cst.Assign) or len(small.targets) != 1:
        return []
    tgt, val = small.targets[0].target, small.value
    if isinstance(tgt, cst.Tuple) and isinstance(val, cst.Tuple) and len(tgt.elements) == len(val.elements):
        return [(t.value, v.value) for t, v in zip(tgt.elements, val.elements)]
    return [(tgt, val)]


def _floordiv(node: cst.BaseExpression) -> tuple[cst.BaseExpression, cst.BaseExpression] | None:
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.FloorDivide):
        return node.left, node.right
    return None


def _stem(name: str) -> str:
    return name[2:] if name.startswith("i_") else name


def _axis_of(call: cst.Call) -> tuple[int, cst.Arg | None]:
    """(position, the axis argument) of a reduction call."""
    pos = [a for a in call.args if a.keyword is None]
    if len(pos) > 1:
        return 1, pos[1]
    kw = next((a for a in call.args if a.keyword and a.keyword.value == "axis"), None)
    return -1, kw


def _set_kwarg(call: cst.Call, name: str, value: cst.BaseExpression, position: int) -> cst.Call:
    """`call` with argument `name` (keyword or the positional `position`) set to `value`."""
    args = list(call.args)
    pos = [i for i, a in enumerate(args) if a.keyword is None]
    for i, a in enumerate(args):
        if (a.keyword is not None and a.keyword.value == name) or (a.keyword is None and len(pos) > position and i == pos[position]):
            args[i] = a.with_changes(value=value)
            return call.with_changes(args=args)
    last = args[-1]
    args[-1] = last.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
    args.append(kwarg(name, value).with_changes(comma=last.comma))
    return call.with_changes(args=args)


def _arg(call: cst.Call, name: str, position: int) -> cst.BaseExpression | None:
    pos = [a for a in call.args if a.keyword is None]
    if len(pos) > position:
        return pos[position].value
    return next((a.value for a in call.args if a.keyword and a.keyword.value == name), None)


class GqaHeadGrouping(PlannedCodemod):
    PATTERN = "gqa_head_grouping"
    DESCRIPTION = "one program per KV head loads each K/V tile once for its G query heads ([BG, BD] tiles, tl.dot)"

    def plan(self, module: cst.Module) -> None:
        k, fn = self.kernel, self.fn
        dots = list(self.body.calls("tl.dot"))
        if dots:
            self.refuse(f"{k.name} already calls tl.dot (line {self.line(dots[0])}): its scores are not per-head reductions to group")
        self.kparams = {p.name: p for p in k.params}
        self._heads(fn)
        self._taint()
        self._ranks()
        self._names()
        self._prologue()
        self.dot_blocks: set[str] = set()
        for stmt in m.findall(fn.body, m.SimpleStatementLine()):
            if any(stmt is s for s in self.prologue_stmts):
                continue
            for small in stmt.body:
                self._statement(small)
            self._shape_note(stmt)
        for node in m.findall(fn.body, m.For() | m.If() | m.While()):
            test = node.iter if isinstance(node, cst.For) else node.test  # type: ignore[union-attr]
            if self._tainted(test):
                self.refuse(f"line {self.line(node)}: `{code(test)[:50]}` depends on the query head: control flow cannot be grouped")
        new = [new_param(n, "tl.constexpr") for n in ([self.g] if self.new_g else []) + ["BG"]]
        self.replace(fn, lambda u: insert_params(u, [(len(k.params), p) for p in new]))
        self._launch(module)

    # -- reading the kernel ---------------------------------------------------------------
    def _heads(self, fn: cst.FunctionDef) -> None:
        """The query-head index, its KV head, the group size and the program axis that counts heads."""
        k = self.kernel
        used = {c.args[0] for c in k.calls_named("tl.program_id") if c.args}
        if len(used) >= 3:
            self.refuse(f"{k.name} uses 3 program_id axes: no grid axis can become the KV-head axis without regrouping the others")
        pids: dict[str, tuple[int, cst.BaseExpression, cst.SimpleStatementLine]] = {}
        pairs: dict[str, tuple[cst.BaseExpression, cst.BaseExpression, cst.SimpleStatementLine]] = {}
        again: set[str] = set()  # assigned more than once: not an index to rename
        for stmt in fn.body.body:
            if not isinstance(stmt, cst.SimpleStatementLine):
                continue
            for small in stmt.body:
                for t, v in _pairs(small):
                    if not isinstance(t, cst.Name):
                        continue
                    p = pid_call(v)
                    if p is not None:
                        pids[t.value] = (p[0], t, stmt)
                    elif t.value in pairs:
                        again.add(t.value)
                    else:
                        pairs[t.value] = (t, v, stmt)
        pairs = {n: p for n, p in pairs.items() if n not in again}
        found = []
        for name, (t, v, stmt) in pairs.items():
            fd = _floordiv(v)
            if fd is None or not isinstance(fd[0], cst.Name):
                continue
            hq, group = fd[0].value, fd[1].with_changes(lpar=[], rpar=[])
            if isinstance(group, cst.Name) and group.value in self.kparams:
                form = (group.value, None, None)
            elif (g2 := _floordiv(group)) and all(isinstance(x, cst.Name) and x.value in self.kparams for x in g2):
                form = (None, g2[0].value, g2[1].value)  # type: ignore[union-attr]
            else:
                continue
            # `i_b = i_bh // HQ` beside `i_hq = i_bh % HQ` splits a flat axis: a sequence index, not a KV head
            flat_split = any(m.matches(v2, m.BinaryOperation(left=m.Name(hq), operator=m.Modulo())) and same(v2.right, group)  # type: ignore[attr-defined]
                             for _, v2, _ in pairs.values())
            if hq in pids and not flat_split:
                found.append((name, hq, form, None))
            elif hq in pairs:
                mod = pairs[hq][1]
                if isinstance(mod, cst.BinaryOperation) and isinstance(mod.operator, cst.Modulo) and isinstance(mod.left, cst.Name) \
                        and mod.left.value in pids and isinstance(mod.right, cst.Name):
                    found.append((name, hq, form, (mod.left.value, mod.right.value)))
        if len(found) != 1:
            self.refuse(f"{'no' if not found else 'more than one'} query-head to KV-head mapping (`i_hk = i_hq // G` or "
                        "`i_hq // (HQ // HK)` of a program index) in " + f"{k.name}: MHA, or the group size is unknown")
        self.hk, self.hq, (g_name, hq_count, hk_count), flat = found[0]
        self.hk_stmt = pairs[self.hk][2]
        if len(self.hk_stmt.body) != 1 or len(_pairs(self.hk_stmt.body[0])) != 1:
            self.refuse(f"line {self.line(self.hk_stmt)}: the KV head {self.hk} is not assigned by a statement of its own")
        self.g_param, self.hq_count, self.hk_count = g_name, hq_count, hk_count
        self.flat = flat
        self.excluded = {id(pairs[self.hk][1])}
        if flat is None:  # the query head is a program axis of its own
            self.axis, self.pid_target, self.pid_stmt = pids[self.hq]
            self.b = None
        else:  # i_b, i_hq = i_bh // HQ, i_bh % HQ
            pid, count = flat
            self.axis, self.pid_target, self.pid_stmt = pids[pid]
            if self.hq_count is not None and self.hq_count != count:
                self.refuse(f"{self.hq} = {pid} % {count}, but the group size is {self.hq_count} // {self.hk_count}")
            self.hq_count = count
            div = [(n, t, v, s) for n, (t, v, s) in pairs.items() if m.matches(v, m.BinaryOperation(
                left=m.Name(pid), operator=m.FloorDivide(), right=m.Name(count)))]
            if len(div) != 1:
                self.refuse(f"{self.hq} = {pid} % {count}, but no `i_b = {pid} // {count}` gives the sequence index")
            self.b, self.b_value, self.b_stmt = div[0][0], div[0][2], div[0][3]
            self.hq_target, self.hq_value, self.hq_stmt = pairs[self.hq]
            self.excluded |= {id(self.b_value), id(self.hq_value)}
        self.prologue_stmts = [self.pid_stmt, self.hk_stmt] + ([self.b_stmt, self.hq_stmt] if flat else [])
        self.excluded |= {id(v) for s in [self.pid_stmt] for small in s.body for _, v in _pairs(small)}

    def _taint(self) -> None:
        """Names whose value depends on the query head (not through its KV head)."""
        roots = {self.hq} | ({self.flat[0]} if self.flat else set())
        tainted = set(roots)
        changed = True
        while changed:
            changed = False
            for name, bs in self.body.bindings.items():
                if name in tainted:
                    continue
                if any(id(b.value) not in self.excluded and names_in(b.value) & tainted for b in bs):
                    tainted.add(name)
                    changed = True
        self.tainted = tainted - ({self.hk, self.b} if self.flat else {self.hk})
        if self.flat:
            pid = self.flat[0]
            uses = [n for n in m.findall(self.fn.body, m.Name(pid))]
            own_stmts = {id(s): s for s in (self.pid_stmt, self.b_stmt, self.hq_stmt)}.values()
            own = [n for s in own_stmts for n in m.findall(s, m.Name(pid))]
            self.pid_used = len(uses) > len(own)

    def _ranks(self) -> None:
        """The rank of every name in the original kernel (0 scalar, 1 vector, 2 tile)."""
        self.ranks: dict[str, int] = {}
        for _ in range(10):
            before = dict(self.ranks)
            for name, bs in self.body.bindings.items():
                self.ranks[name] = max(0 if isinstance(b.stmt, cst.For) else self.rank(b.value) for b in bs)
            if before == self.ranks:
                break
        for name in sorted(self.tainted):
            if self.ranks.get(name, 0) >= 2:
                line = self.line(self.body.bindings[name][0].stmt)
                self.refuse(f"{name} is a 2-D tile per query head (line {line}): only scalars and vectors per head (a [BD] "
                            "accumulator) can gain the group axis")

    def rank(self, node: cst.CSTNode) -> int:
        if isinstance(node, cst.Name):
            return self.ranks.get(node.value, 0)
        if isinstance(node, cst.BinaryOperation):
            return max(self.rank(node.left), self.rank(node.right))
        if isinstance(node, cst.Comparison):
            return max([self.rank(node.left), *(self.rank(c.comparator) for c in node.comparisons)])
        if isinstance(node, cst.UnaryOperation):
            return self.rank(node.expression)
        if isinstance(node, cst.IfExp):
            return max(self.rank(node.body), self.rank(node.orelse))
        if isinstance(node, cst.Subscript):
            if any(isinstance(e.slice, cst.Index) and m.matches(e.slice.value, m.Name("None")) for e in node.slice):
                return len(node.slice)
            return self.rank(node.value)
        if isinstance(node, cst.Call):
            name = dotted(node.func) or ""
            args = [a.value for a in node.args if a.keyword is None]
            if name == "tl.arange":
                return 1
            if name in ("tl.zeros", "tl.full", "tl.empty"):
                shape = args[0] if args else None
                return len(shape.elements) if isinstance(shape, (cst.List, cst.Tuple)) else 1
            if name == "tl.load":
                return self.rank(args[0]) if args else 0
            if name in REDUCTIONS:
                return max(0, self.rank(args[0]) - 1) if _axis_of(node)[1] is not None else 0
            if name == "tl.dot":
                return 2
            if isinstance(node.func, cst.Attribute) and not name.startswith(("tl.", "triton.")):
                return self.rank(node.func.value)  # x.to(...)
            return max([0, *(self.rank(a) for a in args)])
        return 0

    def _tainted(self, node: cst.CSTNode) -> bool:
        return bool(names_in(node) & self.tainted)

    def _names(self) -> None:
        k = self.kernel
        taken = set(self.kparams) | set(self.body.bindings)
        self.rename = {n: f"o_{_stem(n)}" for n in self.tainted if n.startswith("i_") or n == self.hq or (self.flat and n == self.flat[0])}
        self.o_hq = self.rename[self.hq]
        self.new_g = self.g_param is None
        self.g = self.g_param or "G"
        new = [*self.rename.values(), *NEW_NAMES, *(["G"] if self.new_g else [])]
        if self.flat:
            self.new_pid = f"i_{_stem(self.b)}{_stem(self.hk)}"
            new.append(self.new_pid)
        clash = sorted({n for n in new if n in taken and n not in self.rename})
        if clash:
            self.refuse(f"{k.name} already uses the name {clash[0]}")

    # -- kernel edits ---------------------------------------------------------------------
    def _prologue(self) -> None:
        hk, g = self.hk, self.g
        rows = [f"{self.o_hq} = {hk} * {g} + tl.arange(0, BG)", f"m_g = tl.arange(0, BG) < {g}"]
        if self.flat is None:
            self.replace(self.pid_target, cst.Name(hk))
        else:
            pid, count = self.flat
            kv = self.hk_count or f"({count} // {g})"
            self.kv_heads = kv
            self.replace(self.pid_target, cst.Name(self.new_pid))
            self.replace(self.b_value, expr(f"{self.new_pid} // {kv}"))
            self.replace(self.hq_value, expr(f"{self.new_pid} % {kv}"))
            self.replace(self.hq_target, cst.Name(hk))
            if self.pid_used:
                rows.append(f"{self.rename[pid]} = {self.b} * {count} + {self.o_hq}")
        text = f"# the query heads of KV head {hk}, padded to BG rows: [BG]\n" + "\n".join(rows) + "\n"
        self.remove(self.hk_stmt)
        self.insert_after(self.hk_stmt, stmts(text))

    def _statement(self, small: cst.BaseSmallStatement) -> None:
        if isinstance(small, cst.Assign):
            for t, v in _pairs(small):
                if not isinstance(t, cst.Name):
                    if self._tainted(v):
                        self.refuse(f"line {self.line(small)}: a per-query-head value assigned to `{code(t)}`")
                    continue
                if t.value in self.rename:
                    self.replace(t, cst.Name(self.rename[t.value]))
                if self._tainted(v):
                    self._set(v, self.rw(v, self.rank(v)))
                elif t.value in self.tainted:
                    self._set(v, self._init(t.value, v))
        elif isinstance(small, cst.AugAssign):
            if self._tainted(small.value) or self._tainted(small.target):
                if not (isinstance(small.target, cst.Name) and small.target.value in self.tainted):
                    self.refuse(f"line {self.line(small)}: `{code(small)[:50]}` adds a per-query-head value to a shared one")
                self._set(small.value, self.rw(small.value, self.rank(small.target)))
        elif isinstance(small, cst.Expr) and self._tainted(small.value):
            self._set(small.value, self.rw(small.value, 0))
        elif self._tainted(small):
            self.refuse(f"line {self.line(small)}: `{code(small)[:50]}` uses the query head")

    def _shape_note(self, stmt: cst.SimpleStatementLine) -> None:
        """A `# [BN]` note above a statement that now assigns a per-head value reads `# [BG, BN]`."""
        bound = {t.value for small in stmt.body for t, _ in _pairs(small) if isinstance(t, cst.Name)}
        if not bound or not bound <= self.tainted or not any(ln.comment and SHAPE_NOTE.fullmatch(ln.comment.value) for ln in stmt.leading_lines):
            return
        self.replace(stmt, lambda u: u.with_changes(leading_lines=[
            ln.with_changes(comment=ln.comment.with_changes(value=SHAPE_NOTE.sub(r"# [BG, \1]", ln.comment.value)))
            if ln.comment and SHAPE_NOTE.fullmatch(ln.comment.value) else ln for ln in u.leading_lines]))

    def _set(self, old: cst.BaseExpression, new: cst.BaseExpression) -> None:
        if new is not old:
            self.replace(old, new)

    def _init(self, name: str, value: cst.BaseExpression) -> cst.BaseExpression:
        """The start value of a loop-carried per-head value, with the group axis in front."""
        r = self.ranks.get(name, 0)
        v = value.with_changes(lpar=[], rpar=[])
        if isinstance(v, cst.Call) and dotted(v.func) in ("tl.zeros", "tl.full") and v.args \
                and isinstance(v.args[0].value, (cst.List, cst.Tuple)) and len(v.args[0].value.elements) == r:
            shape = v.args[0].value
            dims = ["BG", *(code(e.value) for e in shape.elements)]
            return value.with_changes(args=[v.args[0].with_changes(value=expr(f"[{', '.join(dims)}]")), *v.args[1:]])
        if r == 0 and (isinstance(v, (cst.Integer, cst.Float)) or code(v).replace(" ", "") in ('float("-inf")', "float('-inf')",
                                                                                               '-float("inf")', "-float('inf')")):
            if isinstance(v, (cst.Integer, cst.Float)) and float(v.value) == 0:
                return expr("tl.zeros([BG], dtype=tl.float32)")
            return expr(f"tl.full([BG], {code(v)}, dtype=tl.float32)")
        self.refuse(f"line {self.line(value)}: {name} starts as `{code(value)}` and becomes per-query-head in the loop: "
                    "only constants (0, -inf, tl.zeros, tl.full) can start a per-head value")
        raise AssertionError  # unreachable

    def rw(self, node: cst.BaseExpression, ctx: int) -> cst.BaseExpression:
        """`node` (original rank <= ctx) rewritten with the group axis, broadcast into an expression of original rank ctx."""
        if not self._tainted(node):
            if ctx == 1 and self.rank(node) == 1 and isinstance(node, (cst.Name, cst.Call)):
                return self._bcast(node, "[None, :]")
            if isinstance(node, (cst.BinaryOperation, cst.Comparison, cst.UnaryOperation)) and ctx == 1:
                return self._push(node, ctx)
            return node
        r = self.rank(node)
        if isinstance(node, (cst.BinaryOperation, cst.Comparison, cst.UnaryOperation)):
            return self._push(node, max(ctx, r))
        if isinstance(node, cst.Name):
            new = cst.Name(self.rename.get(node.value, node.value), lpar=node.lpar, rpar=node.rpar)
            if new.value == node.value:
                new = node
            return self._widen(new, ctx - r)
        if isinstance(node, cst.Call):
            return self._widen(self._call(node, r), ctx - r)
        if isinstance(node, cst.Subscript):
            self.refuse(f"line {self.line(node)}: the per-query-head `{code(node)}` is indexed outside the q·k and p·v products")
        self.refuse(f"line {self.line(node)}: cannot group `{code(node)[:50]}` over the query heads")
        raise AssertionError  # unreachable

    def _push(self, node: cst.BaseExpression, ctx: int) -> cst.BaseExpression:
        if isinstance(node, cst.BinaryOperation):
            return node.with_changes(left=self.rw(node.left, ctx), right=self.rw(node.right, ctx))
        if isinstance(node, cst.UnaryOperation):
            return node.with_changes(expression=self.rw(node.expression, ctx))
        assert isinstance(node, cst.Comparison)
        return node.with_changes(left=self.rw(node.left, ctx),
                                 comparisons=[c.with_changes(comparator=self.rw(c.comparator, ctx)) for c in node.comparisons])

    def _bcast(self, node: cst.BaseExpression, index: str) -> cst.BaseExpression:
        return expr(f"{code(node)}{index}")

    def _widen(self, node: cst.BaseExpression, extra: int) -> cst.BaseExpression:
        """A per-head value of rank r in an expression of rank r + extra: new axes after the group axis."""
        return self._bcast(node, "[:" + ", None" * extra + "]") if extra > 0 else node

    def _call(self, node: cst.Call, r: int) -> cst.BaseExpression:
        name = dotted(node.func) or ""
        if name in ("tl.load", "tl.store"):
            return self._memory(node, name)
        if name in REDUCTIONS:
            return self._reduce(node, name)
        if name in ELEMENTWISE:
            return node.with_changes(args=[a.with_changes(value=self.rw(a.value, r)) if a.keyword is None or a.keyword.value != "dtype" else a
                                           for a in node.args])
        if isinstance(node.func, cst.Attribute) and not name.startswith(("tl.", "triton.")):  # x.to(...)
            if any(self._tainted(a.value) for a in node.args):
                self.refuse(f"line {self.line(node)}: `{code(node)[:50]}` takes a per-query-head argument")
            return node.with_changes(func=node.func.with_changes(value=self.rw(node.func.value, r)))
        self.refuse(f"line {self.line(node)}: `{name or code(node.func)}` of a per-query-head value is not grouped by this rewrite")
        raise AssertionError  # unreachable

    def _memory(self, node: cst.Call, name: str) -> cst.Call:
        ptr = _arg(node, "pointer", 0)
        if ptr is None or not self._tainted(ptr):
            self.refuse(f"line {self.line(node)}: {name} of a per-query-head value at an address that does not depend on the query head")
        r = self.rank(ptr)
        if r > 1:
            self.refuse(f"line {self.line(node)}: a [{r}-D] {name} per query head: only rows and [BD] vectors per head can be grouped")
        new = _set_kwarg(node, "pointer", self.rw(ptr, r), 0)
        if name == "tl.store":
            value = _arg(node, "value", 1)
            new = _set_kwarg(new, "value", self.rw(value, r), 1)  # type: ignore[arg-type]
        at = 1 if name == "tl.load" else 2
        mask = _arg(node, "mask", at)
        rows = "m_g[:, None]" if r == 1 else "m_g"
        if mask is None:
            combined = expr(rows)
        else:
            inner = self.rw(mask, r)
            text = code(inner)
            if not (isinstance(inner, (cst.Name, cst.Subscript, cst.Call)) or inner.lpar
                    or (isinstance(inner, cst.BinaryOperation) and isinstance(inner.operator, cst.BitAnd))):
                text = f"({text})"
            combined = expr(f"{rows} & {text}")
        return _set_kwarg(new, "mask", combined, at)

    def _reduce(self, node: cst.Call, name: str) -> cst.BaseExpression:
        x = node.args[0].value
        pos, axis_arg = _axis_of(node)
        axis = None
        if axis_arg is not None:
            a = axis_arg.value
            if isinstance(a, cst.Integer):
                axis = int(a.value)
            elif m.matches(a, m.UnaryOperation(operator=m.Minus(), expression=m.Integer())):
                axis = -int(a.expression.value)  # type: ignore[attr-defined]
            else:
                self.refuse(f"line {self.line(node)}: {name} over axis `{code(a)}`: a literal axis is needed to move it past the group axis")
        inner = x.with_changes(lpar=[], rpar=[])
        if name == "tl.sum" and isinstance(inner, cst.BinaryOperation) and isinstance(inner.operator, cst.Multiply) and axis is not None:
            dot = self._contraction(node, inner, axis)
            if dot is not None:
                return dot
        if self.rank(x) != 1 or any(a.keyword and a.keyword.value == "keep_dims" for a in node.args):
            self.refuse(f"line {self.line(node)}: `{code(node)[:60]}` reduces a per-query-head tile that is not a q·k or p·v product")
        new_x = self.rw(x, 1)
        args = [node.args[0].with_changes(value=new_x), *node.args[1:]]
        if axis_arg is None:
            args[0] = args[0].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
            args.insert(1, cst.Arg(cst.Integer("1"), comma=node.args[0].comma))
        elif axis >= 0:  # type: ignore[operator]
            args = [a.with_changes(value=cst.Integer(str(axis + 1))) if a is axis_arg else a for a in node.args]
            args[0] = args[0].with_changes(value=new_x)
        return node.with_changes(args=args)

    def _contraction(self, node: cst.Call, prod: cst.BinaryOperation, axis: int) -> cst.BaseExpression | None:
        """`tl.sum(U * t[None, :], 1)` -> tl.dot(t, tl.trans(U)); `tl.sum(t[:, None] * U, 0)` -> tl.dot(t, U)."""
        sides = [(prod.left, prod.right), (prod.right, prod.left)]
        for t_side, u in sides:
            if not self._tainted(t_side) or self._tainted(u) or not isinstance(t_side, cst.Subscript) or self.rank(u) != 2:
                continue
            if len(t_side.slice) != 2 or self.rank(t_side.value) != 1:
                continue
            first_none = m.matches(t_side.slice[0].slice, m.Index(m.Name("None")))
            axis = axis % 2
            if first_none != (axis == 1):
                self.refuse(f"line {self.line(node)}: `{code(node)[:60]}` sums a per-head vector along its own axis: not a q·k or p·v product")
            self._check_fp32(u)
            t = self.rw(t_side.value, 1)
            self.dot_blocks |= self.body.aranges(t_side.value)
            if axis == 1:  # q·kᵀ: t is q, the sum runs over its columns
                if ".to(tl.float32)" not in code(self.body.expand(t_side.value)):
                    self.refuse(f"line {self.line(node)}: q `{code(t_side.value)}` is not converted with .to(tl.float32): tl.dot needs one "
                                "operand dtype")
                return expr(f"tl.dot({code(t)}, tl.trans({code(u)}))")
            return expr(f"tl.dot({code(t)}, {code(u)})")
        return None

    def _check_fp32(self, u: cst.BaseExpression) -> None:
        """The K/V operand must be the kernel's fp32 conversion: tl.dot takes one dtype, and bf16 dots are wrong in the interpreter."""
        v: cst.BaseExpression = u
        for _ in range(4):
            if isinstance(v, cst.Name) and self.body.single(v.value) is not None:
                v = self.body.single(v.value)  # type: ignore[assignment]
        v = v.with_changes(lpar=[], rpar=[])
        ok = isinstance(v, cst.Call) and isinstance(v.func, cst.Attribute) and v.func.attr.value == "to" and v.args \
            and code(v.args[0].value) == "tl.float32"
        if not ok:
            self.refuse(f"the K/V tile `{code(u)[:40]}` (line {self.line(u)}) is not converted with .to(tl.float32): tl.dot needs it in "
                        "q's fp32")

    # -- launcher -----------------------------------------------------------------------
    def _launch(self, module: cst.Module) -> None:
        k = self.kernel
        if len(k.launches) != 1:
            self.refuse(f"{k.name} is launched {len(k.launches)}× in this file: the rewrite needs its one launch")
        la = find_launch(self, module, k.launches[0].line, [p.name for p in k.params])
        grid = la.grid
        if isinstance(grid, cst.Name):
            found = la.assigns.get(grid.value, [])
            if len(found) != 1:
                self.refuse(f"the grid `{grid.value}` is assigned {len(found)}× in {la.host.name.value}")
            grid = found[0][1]
        if not isinstance(grid, cst.Tuple) or len(grid.elements) <= self.axis:
            self.refuse(f"the grid of line {self.line(la.call)} (`{code(grid)}`) has no axis {self.axis} to count KV heads")

        def host(p: str | None) -> str | None:
            v = la.value(p) if p else None
            return code(v) if v is not None else None

        old = grid.elements[self.axis].value
        hq_host = host(self.hq_count) if self.hq_count else code(old)
        if hq_host is None:
            self.refuse(f"the launch does not pass {self.hq_count}")
        if self.g_param:
            g_host = host(self.g_param)
            if g_host is None:
                self.refuse(f"the launch does not pass {self.g_param}")
            fd = _floordiv(expr(g_host).with_changes(lpar=[], rpar=[]))
            hk_host = code(fd[1]) if fd and same(fd[0], expr(hq_host)) else f"{paren(hq_host)} // {paren(g_host)}"  # type: ignore[arg-type]
        else:
            hk_host = host(self.hk_count)
            if hk_host is None:
                self.refuse(f"the launch does not pass {self.hk_count}")
            g_host = f"{paren(hq_host)} // {paren(hk_host)}"
        # the head axis: the query-head count itself, or a product with it as a factor
        target = None
        if same(old, expr(hq_host)):
            target = old
        elif self.flat:
            stack = [old]
            while stack:
                n = stack.pop()
                if isinstance(n, cst.BinaryOperation) and isinstance(n.operator, cst.Multiply):
                    for side in (n.left, n.right):
                        if same(side, expr(hq_host)):
                            target = side
                        else:
                            stack.append(side)
        if target is None:
            self.refuse(f"grid axis {self.axis} is `{code(old)}`: it does not count the query heads {hq_host}")
        new_hk = expr(hk_host if target is old else paren(hk_host))
        self.replace(target, new_hk)
        new_elem = code(new_hk) if target is old else code(old.deep_replace(target, new_hk))  # type: ignore[arg-type]
        # another axis sized from the old head count (the split rule) divides by the programs the grid now has
        for e in grid.elements:
            if e.value is old or not isinstance(e.value, cst.Name):
                continue
            found = la.assigns.get(e.value.value, [])
            if len(found) != 1:
                continue
            stmt, value = found[0]
            hits = [n for n in m.findall(value, m.BinaryOperation()) if unparen(code(n)) == unparen(code(old))]
            if not hits:
                continue
            for n in hits:
                self.replace(n, expr(new_elem))
            was, now = unparen(code(old)).replace(" ", ""), new_elem.replace(" ", "")
            self.replace(stmt, lambda u, w=was, n=now: u.with_changes(leading_lines=[
                ln.with_changes(comment=ln.comment.with_changes(value=ln.comment.value.replace(w, n))) if ln.comment else ln
                for ln in u.leading_lines]))
        # tl.dot needs blocks of at least 16
        for block in sorted(self.dot_blocks):
            if block not in self.kparams or not self.kparams[block].constexpr:
                continue
            v = la.value(block)
            if v is None:
                continue
            lit = la.literal(v)
            if lit is not None and lit < MIN_DOT:
                self.refuse(f"{block} = {lit}: tl.dot needs blocks of at least {MIN_DOT}")
            if isinstance(v, cst.Name) and len(la.assigns.get(v.value, [])) == 1:
                v = la.assigns[v.value][0][1]
            if isinstance(v, cst.Call) and dotted(v.func) == "triton.next_power_of_2":
                self.replace(v, expr(f"max({MIN_DOT}, {code(v)})"))
        # BG (and G) on the host
        if "BG" in la.assigns or any(p.name.value == "BG" for p in la.host.params.params):
            self.refuse(f"{la.host.name.value} already uses the name BG")
        rows = self.params.get("block_h", MIN_DOT)
        block = stmts("# tl.dot needs at least 16 rows: a group of query heads is padded to BG, the padding masked\n"
                      f"BG = max({rows}, triton.next_power_of_2({unparen(g_host)}))\n")
        self.insert_before(la.stmt, block)
        options = ("num_warps", "num_stages", "num_ctas", "maxnreg")
        at = next((i for i, a in enumerate(la.call.args) if a.keyword and a.keyword.value in options), len(la.call.args))
        new_args = ([(at, kwarg(self.g, unparen(g_host)))] if self.new_g else []) + [(at, kwarg("BG", "BG"))]
        self.replace(la.call, lambda u: insert_args(u, new_args))
        self.keep_width(la.stmt)
