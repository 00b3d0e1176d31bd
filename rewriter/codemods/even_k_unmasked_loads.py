"""Compile an unmasked K loop for shapes that divide evenly: `if EVEN_K:` loads without the tail mask.

For the first `range(start, K, BK)` loop of the target kernel whose bound K is a
runtime parameter and whose step BK is a tl.constexpr, every run of consecutive
`x = tl.load(ptr, mask=..., other=...)` statements in the loop body whose mask
checks K becomes

    if EVEN_K:
        <the loads, with the conjuncts of the mask that reach K dropped>
    else:
        <the loads as they were>

EVEN_K is a new tl.constexpr parameter, derived by
`@triton.heuristics({"EVEN_K": lambda args: args["K"] % args["BK"] == 0})`
placed right above @triton.jit (under an @triton.autotune, so BK is the tuned
value). Masks on other axes (rows past M or N) stay in both branches. Values
are unchanged: with K % BK == 0 no lane the dropped mask excluded exists.

Refuses: a kernel without such a loop (a constexpr K needs none: the compiler
already knows whether a tail exists); a loop whose loop start is not 0 (a
split-K range starts mid-way and its tail is not K % BK); masked loads that are
not plain assignments in the loop body.
"""
from __future__ import annotations

import libcst as cst
import libcst.matchers as m

from patterns.rewriter.edits import PlannedCodemod, code, expr, names_in


def _conjuncts(node: cst.BaseExpression) -> list[cst.BaseExpression]:
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.BitAnd) and not node.lpar:
        return _conjuncts(node.left) + _conjuncts(node.right)
    return [node.with_changes(lpar=[], rpar=[]) if isinstance(node, cst.BinaryOperation) and node.lpar else node]


def _and(parts: list[cst.BaseExpression]) -> cst.BaseExpression:
    out = parts[0]
    for p in parts[1:]:
        out = cst.BinaryOperation(out, cst.BitAnd(), p)
    return out


class EvenKUnmaskedLoads(PlannedCodemod):
    PATTERN = "even_k_unmasked_loads"
    DESCRIPTION = "an EVEN_K variant of the K loop whose loads skip the tail mask"

    def plan(self, module: cst.Module) -> None:
        k = self.kernel
        runtime = {p.name for p in k.params if not p.constexpr}
        consts = set(k.constexprs)
        for loop in m.findall(self.fn.body, m.For(iter=m.Call(func=m.Name("range") | m.Attribute(attr=m.Name("range"))))):
            args = [a.value for a in loop.iter.args if a.keyword is None]  # type: ignore[attr-defined]
            if len(args) != 3 or not isinstance(args[1], cst.Name) or args[1].value not in runtime \
                    or not isinstance(args[2], cst.Name) or args[2].value not in consts:
                continue
            bound, block = args[1].value, args[2].value
            runs = self._runs(loop, bound)
            if not runs:
                continue
            if code(args[0]) not in ("0",):
                self.refuse(f"the loop on line {self.line(loop)} starts at `{code(args[0])}`, not 0: its last tile is not K % {block}")
            flag = f"EVEN_{bound.upper()}"
            if flag in {p.name for p in k.params}:
                self.refuse(f"{k.name} already has a parameter {flag}")
            for run in runs:
                self._wrap(run, flag, bound)
            self._add_flag(flag, bound, block)
            return
        self.refuse(f"{k.name}: no loop over a runtime length in steps of a constexpr block with masked loads "
                    "(a constexpr length needs no EVEN_K: the compiler already knows the tail)")

    def _reaches(self, node: cst.CSTNode, bound: str, loop: cst.For) -> bool:
        # names defined in the loop body (m_k = o_k < K) are followed through their single assignment
        seen, todo = set(), set(names_in(node))
        while todo:
            n = todo.pop()
            if n in seen:
                continue
            seen.add(n)
            if n == bound:
                return True
            v = self.body.single(n)
            if v is not None:
                todo |= names_in(v)
        return False

    def _masked_load(self, stmt: cst.BaseStatement, bound: str, loop: cst.For) -> bool:
        if not m.matches(stmt, m.SimpleStatementLine(body=[m.Assign(value=m.Call(func=m.Attribute(attr=m.Name("load"))))])):
            return False
        call = stmt.body[0].value  # type: ignore[attr-defined]
        mask = next((a.value for a in call.args if a.keyword and a.keyword.value == "mask"), None)
        return mask is not None and any(self._reaches(c, bound, loop) for c in _conjuncts(mask))

    def _runs(self, loop: cst.For, bound: str) -> list[list[cst.SimpleStatementLine]]:
        runs, cur = [], []
        for stmt in loop.body.body:  # type: ignore[attr-defined]
            if self._masked_load(stmt, bound, loop):
                cur.append(stmt)
            else:
                if cur:
                    runs.append(cur)
                cur = []
        if cur:
            runs.append(cur)
        return runs

    def _unmasked(self, stmt: cst.SimpleStatementLine, bound: str) -> cst.SimpleStatementLine:
        assign = stmt.body[0]
        call = assign.value  # type: ignore[attr-defined]
        mask = next(a.value for a in call.args if a.keyword and a.keyword.value == "mask")
        keep = [c for c in _conjuncts(mask) if not self._reaches(c, bound, None)]  # type: ignore[arg-type]
        args = []
        for a in call.args:
            if a.keyword and a.keyword.value == "mask":
                if keep:
                    args.append(a.with_changes(value=_and(keep)))
                continue
            if a.keyword and a.keyword.value == "other" and not keep:
                continue
            args.append(a)
        if args:
            args[-1] = args[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        return stmt.with_changes(body=[assign.with_changes(value=call.with_changes(args=args))], leading_lines=[])

    def _wrap(self, run: list[cst.SimpleStatementLine], flag: str, bound: str) -> None:
        even = [self._unmasked(s, bound) for s in run]
        odd = [s.with_changes(leading_lines=[]) for s in run]
        node = cst.If(test=cst.Name(flag), body=cst.IndentedBlock(body=even),
                      orelse=cst.Else(body=cst.IndentedBlock(body=odd)), leading_lines=run[0].leading_lines)
        self.replace(run[0], lambda u, n=node: n)
        for s in run[1:]:
            self.remove(s)

    def _add_flag(self, flag: str, bound: str, block: str) -> None:
        fn = self.fn
        self.replace(fn.params, lambda u: u.with_changes(params=[
            *u.params[:-1], u.params[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))),
            cst.Param(cst.Name(flag), annotation=cst.Annotation(expr("tl.constexpr"), whitespace_before_indicator=cst.SimpleWhitespace(""))),
        ]))
        jit = next((d for d in fn.decorators if code(d.decorator).split("(")[0] in ("triton.jit", "jit")), None)
        if jit is None:
            self.refuse(f"{self.kernel.name} has no @triton.jit decorator")
        rule = f"@triton.heuristics({{{self.q(flag)}: lambda args: args[{self.q(bound)}] % args[{self.q(block)}] == 0}})\n"
        heur = cst.Decorator(decorator=expr(rule[1:].strip()))
        index = list(fn.decorators).index(jit)

        def add(u: cst.FunctionDef) -> cst.FunctionDef:
            decs = list(u.decorators)
            decs.insert(index, heur.with_changes(leading_lines=decs[index].leading_lines))
            decs[index + 1] = decs[index + 1].with_changes(leading_lines=[])
            return u.with_changes(decorators=decs)

        self.replace(fn, add)
