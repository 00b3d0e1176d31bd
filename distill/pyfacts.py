"""Python/Triton facts for upstream files, at the scale of a whole wheel.

Upstream modules are mostly host code, and the foundation's extractor
(patterns.core.facts.kernel) records far more per node than host code needs. So each
file is parsed once and split:

* the kernel part -- imports, module-level assignments and blocks (constants,
  conditional @triton.jit helpers), every function or class with a jit-style
  decorator or a nested kernel -- goes to the foundation's extractor, as the
  kept statements of the same tree (a blanked copy of the text, every line
  number unchanged, is parsed only when a wrapped kernel needs its decorator
  written above it);
* host functions are read by the facts package's host reader
  (patterns.core.facts.host) into the same FileFacts fields the
  extractor fills for them (host_calls, launches, host_assigns,
  host_functions), with the same normalisation of names.
"""
from __future__ import annotations

import ast
import bisect
import copy
import re
from typing import NamedTuple

from pydantic import BaseModel, Field

from patterns.core.facts import FactsError, extract_source
from patterns.core.facts.host import read_host
from patterns.core.facts_types import FileFacts

# decorators that make (or wrap) a Triton kernel; the extractor decides the rest
_KERNEL_DECORATOR = re.compile(r"(^|\.)(\w*jit|\w*autotune|\w*heuristics|kernel|constexpr_function)$")
_HOST_ANCHORS = re.compile(r"\b(triton|tl|ctypes|CDLL|PyDLL|TensorDescriptor|make_tensor_descriptor|set_allocator)\b")
# a Python file is in scope only if it mentions one of these, or binds a module-level table of
# functions (cheap byte tests before any parse): kernels, their launchers, and the host helpers
# that register, compile or dispatch them without importing triton
SCOPE_TOKENS = (b"triton", b"ctypes", b"tilelang", b"torch.ops.", b"torch.library", b"custom_op", b"register_fake",
                b"load_jit", b"load_inline", b"cpp_extension", b"deep_gemm", b"fla.backends")
_TABLE = re.compile(rb"^[A-Za-z_]\w*\s*(:[^=\n]*)?=\s*\{\s*(#[^\n]*)?\n(\s+[^\n:]+:\s*[A-Za-z_][\w.]*\s*,\s*(#[^\n]*)?\n){2,}", re.M)
OUT_OF_SCOPE = "Python without kernels, launchers or dispatch"


def in_scope(data: bytes) -> bool:
    return any(tok in data for tok in SCOPE_TOKENS) or _TABLE.search(data) is not None
_BIG_STATEMENT = 400  # lines: a module-level assignment this long is a data table, not a constant


class Symbol(BaseModel):
    name: str
    line: int
    end_line: int


class PyRecord(BaseModel):
    """What the distiller keeps of one Python file (cached by content hash)."""

    facts: FileFacts
    module: str = ""
    symbols: list[Symbol] = Field(default_factory=list, description="top-level functions and classes with line ranges")
    kept_lines: int = 0
    kernel_aliases: dict[str, str] = Field(default_factory=dict, description="`k = triton.jit(...)(f)`: k -> f")


def _decorator_name(d: ast.expr) -> str:
    target = d.func if isinstance(d, ast.Call) else d
    parts = []
    while isinstance(target, ast.Attribute):
        parts.append(target.attr)
        target = target.value
    if isinstance(target, ast.Name):
        parts.append(target.id)
    return ".".join(reversed(parts))


def _is_kernel_def(node: ast.AST) -> bool:
    return isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
        _KERNEL_DECORATOR.search(_decorator_name(d)) for d in node.decorator_list
    )


def _start(node: ast.stmt) -> int:
    decos = getattr(node, "decorator_list", None) or []
    return min([node.lineno, *[d.lineno for d in decos]])


def _kernel_lines(tree: ast.Module) -> list[int]:
    """Sorted `def` lines of every kernel definition, at any depth (definitions are statements: no expression is walked)."""
    out = []
    stack: list[ast.AST] = list(tree.body)
    while stack:
        node = stack.pop()
        if _is_kernel_def(node):
            out.append(node.lineno)
        for name in ("body", "orelse", "finalbody", "handlers", "cases"):
            block = getattr(node, name, None)
            if isinstance(block, list):
                stack.extend(block)
    return sorted(out)


def _has_kernel(node: ast.AST, kernel_lines: list[int]) -> bool:
    i = bisect.bisect_left(kernel_lines, node.lineno)
    return i < len(kernel_lines) and kernel_lines[i] <= (node.end_lineno or node.lineno)


def wrapped_kernels(tree: ast.Module, lines: list[str]) -> dict[str, list[tuple[str, str]]]:
    """Module-level `k = triton.jit(...)(f)` or `k = triton.jit(f)`: f -> [(decorator text, k)]."""
    out: dict[str, list[tuple[str, str]]] = {}
    for node in tree.body:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
            continue
        call = node.value
        if not (isinstance(call, ast.Call) and len(call.args) == 1 and isinstance(call.args[0], ast.Name) and not call.keywords):
            continue
        deco = call.func
        if not _KERNEL_DECORATOR.search(_decorator_name(deco)):
            continue
        a, b = deco.lineno, deco.end_lineno or deco.lineno
        text = "\n".join(lines[a - 1:b])
        text = text[deco.col_offset:] if a == b else text[deco.col_offset:]
        text = text[: len(text) - (len(lines[b - 1]) - deco.end_col_offset)] if deco.end_col_offset is not None else text
        out.setdefault(call.args[0].id, []).append((" ".join(text.split()), node.targets[0].id))
    return out


def _decorate_wrapped(lines: list[str], tree: ast.Module, wrapped: dict[str, list[tuple[str, str]]]) -> set[str]:
    """Write `@<decorator>` on the blank or comment line right above each wrapped function (lines keep their numbers)."""
    done = set()
    for node in tree.body:
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or node.name not in wrapped or node.decorator_list:
            continue
        above = node.lineno - 2  # 0-based index of the line above `def`
        if above >= 0 and (not lines[above].strip() or lines[above].lstrip().startswith("#")) and node.col_offset == 0:
            lines[above] = "@" + wrapped[node.name][0][0]
            done.add(node.name)
    return done


class Slice(NamedTuple):
    text: str  # the source with host code blanked (line numbers unchanged)
    kept_lines: int
    host: list[ast.AST]  # host functions and methods left out, for the host reader
    module: ast.Module | None  # the kept statements of the original tree; None when a line was rewritten (parse `text`)


def slice_source(source: str, tree: ast.Module) -> Slice:
    """Blank the lines of host code."""
    lines = source.split("\n")
    keep = [False] * (len(lines) + 1)
    host: list[ast.AST] = []
    wrapped = _decorate_wrapped(lines, tree, wrapped_kernels(tree, lines))
    kernel_lines = _kernel_lines(tree)

    def mark(a: int, b: int) -> None:
        for i in range(a, min(b, len(lines)) + 1):
            keep[i] = True

    for node in tree.body:
        a, b = _start(node), node.end_lineno or node.lineno
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            mark(a, b)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            if b - a < _BIG_STATEMENT or _HOST_ANCHORS.search("\n".join(lines[a - 1:b])):
                mark(a, b)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if node.name in wrapped:
                mark(a - 1, b)  # with the decorator written above it
            elif _has_kernel(node, kernel_lines):
                mark(a, b)
            else:
                host.append(node)
        elif isinstance(node, ast.ClassDef):
            if not _has_kernel(node, kernel_lines):
                host.append(node)
                continue
            # keep the class header and its kernel members; host methods are read by the host reader
            body_start = _start(node.body[0]) if node.body else b
            mark(a, body_start - 1)
            for member in node.body:
                ma, mb = _start(member), member.end_lineno or member.lineno
                if isinstance(member, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and not _has_kernel(member, kernel_lines):
                    host.append(member)
                else:
                    mark(ma, mb)
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue  # docstrings
        else:
            # if/try/with/for/expression statements at module level: conditional
            # imports and helper definitions, library handles made at import
            mark(a, b)
    kept_lines = sum(keep)
    out = [line if keep[i + 1] else "" for i, line in enumerate(lines)]
    return Slice("\n".join(out), kept_lines, host, None if wrapped else _kept_statements(tree, keep))


def _kept_statements(tree: ast.Module, keep: list[bool]) -> ast.Module:
    """What parsing the blanked text gives, without parsing it again: the statements whose first line is kept."""
    body = []
    for node in tree.body:
        if not keep[_start(node)]:
            continue
        if isinstance(node, ast.ClassDef) and not all(keep[_start(m)] for m in node.body):
            node = copy.copy(node)  # the original keeps its host methods for the host reader
            node.body = [m for m in node.body if keep[_start(m)]]
        body.append(node)
    return ast.Module(body=body, type_ignores=[])


def module_name(path: str) -> str:
    """`fla/ops/utils/op.py` -> `fla.ops.utils.op`; `pkg/__init__.py` -> `pkg`."""
    p = path[:-3] if path.endswith(".py") else path
    parts = [x for x in p.split("/") if x]
    if parts and parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def extract_python(text: str, path: str) -> PyRecord:
    """Facts of one upstream Python file; raises FactsError (one line) when it cannot be parsed."""
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = text.removeprefix("\ufeff")
    try:
        tree = ast.parse(text, filename=path)
    except SyntaxError as exc:
        raise FactsError(f"{path}:{exc.lineno or 0}: syntax error: {exc.msg}") from None
    except (ValueError, RecursionError, MemoryError) as exc:
        raise FactsError(f"{path}: cannot parse: {type(exc).__name__}") from None
    symbols = [
        Symbol(name=n.name, line=_start(n), end_line=n.end_lineno or n.lineno)
        for n in tree.body
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
    ]
    sliced = slice_source(text, tree)
    try:
        facts = extract_source(sliced.text, path, sliced.module)
    except RecursionError:
        raise FactsError(f"{path}: cannot parse: nesting too deep") from None
    lines = text.split("\n")
    aliases = {alias: fn for fn, pairs in wrapped_kernels(tree, lines).items() for _, alias in pairs if facts.kernel(fn)}
    read_host(text, sliced.host, facts, aliases, skip=_is_kernel_def)
    facts.lines = text.count("\n") + 1
    return PyRecord(facts=facts, module=module_name(path), symbols=symbols, kept_lines=sliced.kept_lines, kernel_aliases=aliases)
