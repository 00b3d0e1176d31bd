"""Run the fp32 `tl.dot` calls of a kernel at tf32x3 (or IEEE) input precision.

Adds `input_precision=...` to every `tl.dot` of the target kernel (and the
@triton.jit helpers it calls) whose operands are fp32 and whose precision is
the default; `allow_tf32=True` is replaced. With precision=auto a module-level
constexpr picks tf32x3 on NVIDIA and IEEE where TF32 does not exist (AMD, CPU
interpreter), as FLA's context-parallel merge does.
Refuses: a kernel with no fp32 `tl.dot` at default precision.
"""
from __future__ import annotations

import libcst as cst
import libcst.matchers as m
from libcst.codemod.visitors import AddImportsVisitor
from libcst.metadata import PositionProvider

from patterns.rewriter.base import KernelCodemod

AUTO_NAME = "DOT_PRECISION"
AUTO_LINE = (
    f'{AUTO_NAME} = tl.constexpr("tf32x3" if torch.cuda.is_available() and torch.version.hip is None else "ieee")'
)


_BF16_DOT = """
import triton
import triton.language as tl

@triton.jit
def k(a, b, c, BK: tl.constexpr):
    o = tl.arange(0, BK)
    b_a = tl.load(a + o[:, None] * BK + o[None, :]).to(tl.bfloat16)
    b_b = tl.load(b + o[:, None] * BK + o[None, :]).to(tl.bfloat16)
    tl.store(c + o[:, None] * BK + o[None, :], tl.dot(b_a, b_b))
"""


class Tf32x3DotPrecision(KernelCodemod):
    PATTERN = "tf32x3_dot_precision"
    DESCRIPTION = "fp32 tl.dot at tf32x3 precision"
    # (source, reason) pairs the codemod must refuse
    REFUSES = [
        (_BF16_DOT, "no fp32 tl.dot at default precision"),
        ("def f():\n    return 1\n", "no Triton kernel"),
    ]
    METADATA_DEPENDENCIES = (PositionProvider,)

    def visit_Module(self, node: cst.Module) -> None:
        k = self.kernel
        if k is None:
            self.refuse("the file has no Triton kernel")
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
        if self.get_metadata(PositionProvider, original).start.line not in self.lines:
            return updated
        args = [a for a in updated.args if not (a.keyword and a.keyword.value == "allow_tf32")]
        last = args[-1]
        args[-1] = last.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
        args.append(cst.Arg(keyword=cst.Name("input_precision"), value=cst.parse_expression(self.value),
                            equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace(""))))
        return updated.with_changes(args=args)

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
