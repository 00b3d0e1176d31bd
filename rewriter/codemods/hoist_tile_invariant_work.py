"""Hoist loop-invariant loads, and the pure math that consumes them, out of a kernel's loops.

Starts from the loads the `loop_invariant_calls` predicate flags (a tl.load in a
loop whose arguments derive from nothing the loop assigns) and moves each whole
assignment statement that holds one above the loop, with the statements after
it that only read hoisted values and loop-invariant ones (the gate math on a
hoisted A_log, say). A statement leaves as many nested loops as it is invariant
for; hoisted statements keep their order and their text, so the kernel computes
bit-identical values. Nothing is split or rewritten inside a statement.

Refuses when a flagged load cannot move whole: it shares its statement with
values the loop changes, sits under a runtime `if` (or any block other than the
loop body), its target is assigned more than once in the kernel, the statement
calls something with side effects or an unknown helper, or the loop stores to
the memory the load reads.
"""
from __future__ import annotations

import libcst as cst

from patterns.core.predicates import PREDICATES, Subject
from patterns.rewriter.edits import PlannedCodemod, names_in, pointer_bases

COMMENT = "# loop-invariant: computed once here, not on every iteration"
# calls that may be moved: they only read memory or compute
_IMPURE = {"tl.store", "tl.debug_barrier", "tl.device_print", "tl.device_assert", "tl.static_print",
           "tl.static_assert", "tl.inline_asm_elementwise", "print"}
_PURE_METHODS = {".to", ".load", ".reshape", ".trans", ".broadcast_to", ".expand_dims", ".cast"}
_PURE_BUILTINS = {"float", "int", "min", "max", "abs"}


def _bound(target: cst.BaseExpression) -> list[str] | None:
    """Names an assignment target binds; None when it is not a name or a tuple of names."""
    if isinstance(target, cst.Name):
        return [target.value]
    if isinstance(target, (cst.Tuple, cst.List)):
        out: list[str] = []
        for el in target.elements:
            sub = _bound(el.value)
            if sub is None:
                return None
            out += sub
        return out
    return None


def _assign_counts(node: cst.CSTNode) -> dict[str, int]:
    """How many statements bind each name (assignments, augmented assignments, loop targets)."""
    counts: dict[str, int] = {}

    def bump(target: cst.BaseExpression) -> None:
        for n in _bound(target) or []:
            counts[n] = counts.get(n, 0) + 1

    class V(cst.CSTVisitor):
        def visit_Assign(self, n: cst.Assign) -> None:
            for t in n.targets:
                bump(t.target)

        def visit_AugAssign(self, n: cst.AugAssign) -> None:
            bump(n.target)

        def visit_AnnAssign(self, n: cst.AnnAssign) -> None:
            bump(n.target)

        def visit_For(self, n: cst.For) -> None:
            bump(n.target)

    node.visit(V())
    return counts


def _suites(stmt: cst.CSTNode) -> list[cst.BaseSuite]:
    if isinstance(stmt, cst.If):
        out = [stmt.body]
        if isinstance(stmt.orelse, cst.If):
            out += _suites(stmt.orelse)
        elif stmt.orelse is not None:
            out.append(stmt.orelse.body)
        return out
    if isinstance(stmt, (cst.With, cst.Try)):
        return [stmt.body, *[h.body for h in getattr(stmt, "handlers", ())]]
    return []


def _pure(name: str, helpers: list[str]) -> bool:
    """Whether a call (normalised name from the facts) only reads memory or computes."""
    if name in _IMPURE or name.startswith("tl.atomic_") or name in helpers:
        return False
    if name.startswith(("tl.", "libdevice.")):
        return True
    if "." in name:  # a method: b_x.to(...), desc.load(...)
        return "." + name.rsplit(".", 1)[-1] in _PURE_METHODS
    return name in _PURE_BUILTINS


class HoistTileInvariantWork(PlannedCodemod):
    PATTERN = "hoist_tile_invariant_work"
    DESCRIPTION = "hoist loop-invariant loads and the math on them out of the kernel's loops"

    # -- planning: which statements move, and in front of which loop ------------------
    def plan(self, node: cst.Module) -> None:
        k = self.kernel
        verdict = PREDICATES["loop_invariant_calls"].func(Subject(self.facts, k), ops=["tl.load"])
        if not verdict.ok:
            self.refuse(f"{k.name} has no loop-invariant tl.load inside a loop")
        fn = self.fn
        self.flagged = set(verdict.lines)
        self.loop_facts = {lp.line: lp for lp in k.loops}
        self.pointers = {p.name for p in k.params if not p.constexpr}
        self.counts = _assign_counts(fn.body)
        self.why: dict[int, str] = {}  # flagged load line -> why it cannot move
        self.out_of: dict[cst.CSTNode, set[str]] = {}  # loop -> names hoisted out of it so far
        self.hoist: dict[cst.SimpleStatementLine, cst.CSTNode] = {}  # statement -> loop it goes in front of
        self.moved: dict[cst.CSTNode, list[cst.SimpleStatementLine]] = {}
        self._plan_block(fn.body, [])
        for line in sorted(self.flagged):
            if not any(self.line(s) <= line <= self.end_line(s) for s in self.hoist):
                self.refuse(self.why.get(line, f"line {line}: the invariant tl.load could not be hoisted"))

    def _flagged_in(self, node: cst.CSTNode) -> list[int]:
        return [ln for ln in self.flagged if self.line(node) <= ln <= self.end_line(node)]

    def _plan_block(self, block: cst.BaseSuite, chain: list[tuple[cst.CSTNode, bool]]) -> None:
        """`chain`: the enclosing loops, each with whether a statement here may leave it."""
        if not isinstance(block, cst.IndentedBlock):
            return
        for stmt in block.body:
            if isinstance(stmt, (cst.For, cst.While)):
                lp = self.loop_facts.get(self.line(stmt))
                movable = lp is not None and lp.kind != "tl.static_range"  # unrolled: straight-line code
                self._plan_block(stmt.body, [*chain, (stmt, movable)])
            elif isinstance(stmt, cst.SimpleStatementLine):
                if chain:
                    self._plan_statement(stmt, chain)
            elif _suites(stmt):
                kind = "an `if`" if isinstance(stmt, cst.If) else f"a `{type(stmt).__name__.lower()}` block"
                for ln in self._flagged_in(stmt) if chain else []:
                    self.why.setdefault(ln, f"line {ln}: the invariant tl.load sits in {kind} inside the loop; "
                                            "hoisting it would make it unconditional")
                for suite in _suites(stmt):  # statements below it cannot leave it
                    self._plan_block(suite, [(loop, False) for loop, _ in chain])

    def _reject(self, stmt: cst.SimpleStatementLine, reason: str) -> None:
        for ln in self._flagged_in(stmt):
            self.why.setdefault(ln, f"line {ln}: {reason}")

    def _plan_statement(self, stmt: cst.SimpleStatementLine, chain: list[tuple[cst.CSTNode, bool]]) -> None:
        k = self.kernel
        first, last = self.line(stmt), self.end_line(stmt)
        calls = [c for c in k.calls if first <= c.line <= last and not c.via]
        loads = [c for c in calls if c.line in self.flagged and c.name == "tl.load"]
        if len(stmt.body) != 1 or not isinstance(stmt.body[0], cst.Assign):
            self._reject(stmt, "the invariant tl.load is not the value of a plain assignment; give it its own `name = tl.load(...)` first")
            return
        node = stmt.body[0]
        bound = [_bound(t.target) for t in node.targets]
        if any(b is None for b in bound):
            self._reject(stmt, "the assignment target is not a name")
            return
        targets = [n for b in bound for n in b or []]
        reads = names_in(node.value)
        code = cst.Module([]).code_for_node(node).strip()
        short = code if len(code) <= 48 else code[:45] + "..."
        dest = None  # the outermost loop the statement is invariant for
        for loop, movable in reversed(chain):
            if not movable:
                break
            lp = self.loop_facts[self.line(loop)]
            varying = reads & (set(lp.assigned) - self.out_of.get(loop, set()))
            aliased = self._stored_in(lp.line) & self._bases(node.value)
            if varying or aliased:
                if dest is None and varying:
                    self._reject(stmt, f"the invariant tl.load is part of `{short}`, which also reads "
                                       f"{', '.join(sorted(varying))}, assigned in the loop: give the load its own statement first")
                elif dest is None:
                    for c in loads:
                        self.why.setdefault(c.line, f"the loop on line {lp.line} stores to {', '.join(sorted(aliased))}, "
                                                    f"which the tl.load on line {c.line} reads")
                break
            dest = loop
        if dest is None:
            return
        impure = sorted({c.name for c in calls if not _pure(c.name, k.helpers)})
        if impure:
            self._reject(stmt, f"`{short}` calls {', '.join(impure)}, which may have side effects or is not known to be pure")
            return
        again = [t for t in targets if self.counts.get(t, 0) != 1]
        if again:
            self._reject(stmt, f"{again[0]} is assigned {self.counts.get(again[0], 0)}× in the kernel; a hoisted name must be assigned once")
            return
        # math joins only when it reads a hoisted value: the compiler hoists the rest itself
        if not loads and not reads & self.out_of.get(chain[-1][0], set()):
            return
        loops = [loop for loop, _ in chain]
        for loop in loops[loops.index(dest):]:
            self.out_of.setdefault(loop, set()).update(targets)
        self.hoist[stmt] = dest

    def _bases(self, expr: cst.BaseExpression) -> set[str]:
        return pointer_bases(expr, self.pointers, self.kernel.assigns)

    def _stored_in(self, loop_line: int) -> set[str]:
        """Pointer parameters the loop writes (tl.store, atomics, descriptor stores)."""
        out: set[str] = set()
        for c in self.kernel.calls:
            if c.via or loop_line not in c.loops:
                continue
            if c.name == "tl.store" or c.name.startswith("tl.atomic_") or c.name.endswith((".store", ".atomic_add")):
                if not c.args:
                    return set(self.pointers)
                try:
                    out |= self._bases(cst.parse_expression(c.args[0]))
                except cst.ParserSyntaxError:
                    return set(self.pointers)
        return out

    # -- editing: cut the statements out of their loop, put them in front of the destination
    def leave_SimpleStatementLine(self, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine):
        dest = self.hoist.get(original)
        if dest is None:
            return updated
        comments = [ln for ln in updated.leading_lines if ln.comment is not None]
        self.moved.setdefault(dest, []).append(updated.with_changes(leading_lines=comments))
        return cst.RemovalSentinel.REMOVE

    def _place(self, original: cst.For | cst.While, updated: cst.For | cst.While):
        moved = self.moved.get(original)
        if not moved:
            return updated
        if not updated.body.body:
            self.refuse(f"every statement of the loop on line {self.line(original)} is invariant: the loop would be empty")
        rest = list(updated.leading_lines)
        blank = []
        while rest and rest[0].comment is None:  # blank lines before the loop go before the hoisted block
            blank.append(rest.pop(0))
        header = cst.EmptyLine(comment=cst.Comment(COMMENT))
        moved[0] = moved[0].with_changes(leading_lines=[*blank, header, *moved[0].leading_lines])
        return cst.FlattenSentinel([*moved, updated.with_changes(leading_lines=rest)])

    def leave_For(self, original: cst.For, updated: cst.For):
        return self._place(original, updated)

    def leave_While(self, original: cst.While, updated: cst.While):
        return self._place(original, updated)
