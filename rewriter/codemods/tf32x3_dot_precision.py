"""Run the fp32 `tl.dot` calls of a kernel at tf32x3 (or IEEE) input precision.

Adds `input_precision=...` to every `tl.dot` of the target kernel (and the
@triton.jit helpers it calls) whose operands are fp32 and whose precision is
the default; `allow_tf32=True` is replaced. With precision=auto a module-level
constexpr picks tf32x3 on NVIDIA and IEEE where TF32 does not exist (AMD, CPU
interpreter), as FLA's context-parallel merge does.

tf32x3 keeps a high and a low TF32 part of both operands: at tf32x3 the launch's
num_warps (a literal, or the default 4) doubles once a block the launch passes
reaches 128. On an H200 the [128, 128] x [128, 32] merge spilled 140 registers
a thread at 4 warps and none at 8, and cost 1.32x the TF32 time instead of 2.3x
(evidence/gpu/h200-cp_state_merge).
Refuses: a kernel with no fp32 `tl.dot` at default precision.
"""
from __future__ import annotations

import re

import libcst as cst
import libcst.matchers as m
from libcst.codemod.visitors import AddImportsVisitor

from patterns.rewriter.edits import PlannedCodemod

AUTO_NAME = "DOT_PRECISION"
BLOCK = re.compile(r"B(LOCK(_SIZE)?_)?[A-Z]{1,2}")  # a tile constexpr: BK, BV, BLOCK_K, BLOCK_SIZE_N
AUTO_LINE = (
    f'{AUTO_NAME} = tl.constexpr("tf32x3" if torch.cuda.is_available() and torch.version.hip is None else "ieee")'
)


class Tf32x3DotPrecision(PlannedCodemod):
    PATTERN = "tf32x3_dot_precision"
    DESCRIPTION = "fp32 tl.dot at tf32x3 precision"

    def plan(self, node: cst.Module) -> None:
        k = self.kernel
        names = {k.name, *k.helpers}
        self.lines = {
            c.line for c in k.calls
            if c.name == "tl.dot" and "input_precision" not in c.kwargs and c.kwargs.get("allow_tf32") != "False"
            and (not c.operand_dtypes or all(d in ("float32", "") for d in c.operand_dtypes))
            and any(d == "float32" for d in c.operand_dtypes)
        }
        if not self.lines:
            self.refuse(f"{k.name} has no fp32 tl.dot at default precision")
        self.functions = names
        self.value = AUTO_NAME if self.params["precision"] == "auto" else f'"{self.params["precision"]}"'
        self._stack: list[str] = []
        self.launch_lines = {la.line for la in k.launches} if self.params["precision"] != "ieee" else set()
        self.blocks = [p.name for p in k.params if p.constexpr and BLOCK.fullmatch(p.name)]
        for call in m.findall(node, m.Call(func=m.Subscript(value=m.Name(k.name)))):
            if self.line(call) not in self.launch_lines:
                continue
            self.warps_stmt = None
            self.replace(call, self._more_warps)
            self._more_warps(call)  # sets warps_stmt where the launch needs a named num_warps above it
            if self.warps_stmt is not None:
                stmt = next(s for s in m.findall(node, m.SimpleStatementLine()) if self.line(s) <= self.line(call) <= self.end_line(s))
                self.insert_before(stmt, [self.warps_stmt])

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._stack.append(node.name.value)

    def leave_FunctionDef(self, original: cst.FunctionDef, updated: cst.FunctionDef) -> cst.FunctionDef:
        self._stack.pop()
        return updated

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        if not self._stack or self._stack[-1] not in self.functions:
            return updated
        if not m.matches(original.func, m.Attribute(value=m.Name("tl"), attr=m.Name("dot"))):
            return updated
        if self.line(original) not in self.lines:
            return updated
        args = [a for a in updated.args if not (a.keyword and a.keyword.value == "allow_tf32")]
        last = args[-1]
        args[-1] = last.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
        args.append(cst.Arg(keyword=cst.Name("input_precision"), value=cst.parse_expression(self.value),
                            equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace(""))))
        return updated.with_changes(args=args)

    def _more_warps(self, call: cst.Call) -> cst.Call:
        """`num_warps=w` (w <= 4, or absent: 4) -> `num_warps=2w if max(<blocks>) >= 128 else w`."""
        passed = {a.keyword.value: a for a in call.args if a.keyword}
        blocks = [cst.Module([]).code_for_node(passed[b].value) for b in self.blocks if b in passed]
        warps = passed.get("num_warps")
        if not blocks or (warps is not None and not (isinstance(warps.value, cst.Integer) and int(warps.value.value) <= 4)):
            return call  # the launch sizes its warps itself, or passes no tile to size them from
        w = int(warps.value.value) if warps is not None else 4  # type: ignore[union-attr]
        biggest = blocks[0] if len(blocks) == 1 else f"max({', '.join(blocks)})"
        rule = f"{2 * w} if {biggest} >= 128 else {w}"
        host = next((la.function for la in self.kernel.launches), "")
        if "num_warps" in self.facts.host_assigns.get(host, {}):
            value = cst.parse_expression(rule)
        else:  # a named choice above the launch, with its reason
            value = cst.Name("num_warps")
            self.warps_stmt = cst.parse_statement(
                f"# tf32x3 holds a high and a low part of both operands: twice the warps once a tile reaches 128\nnum_warps = {rule}\n")
        if warps is not None:
            return call.with_changes(args=[a.with_changes(value=value) if a is warps else a for a in call.args])
        args = list(call.args)
        last = args[-1]
        args[-1] = last.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
        args.append(cst.Arg(keyword=cst.Name("num_warps"), value=value, comma=last.comma,
                            equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace(""))))
        return call.with_changes(args=args)

    def leave_Module(self, original: cst.Module, updated: cst.Module) -> cst.Module:
        if self.params["precision"] != "auto":
            return updated
        if self.facts.imports.get("torch") != "torch":
            AddImportsVisitor.add_needed_import(self.context, "torch")
        stmt = cst.parse_statement(AUTO_LINE + "  # tf32x3 needs TF32 tensor cores\n")
        body = list(updated.body)
        # after the module docstring and the imports, before the first definition
        at = 0
        for i, s in enumerate(body):
            is_doc = i == 0 and m.matches(s, m.SimpleStatementLine(body=[m.Expr(m.SimpleString() | m.ConcatenatedString())]))
            if is_doc or m.matches(s, m.SimpleStatementLine(body=[m.Import() | m.ImportFrom()])):
                at = i + 1
            else:
                break
        body.insert(at, stmt.with_changes(leading_lines=[cst.EmptyLine()]))
        return updated.with_changes(body=body)
