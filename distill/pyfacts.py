"""Python/Triton facts for upstream files, at the scale of a whole wheel.

Upstream modules are mostly host code, and the foundation's extractor
(patterns.core.ast_facts) records far more per node than host code needs. So each
file is parsed once and split:

* the kernel part -- imports, module-level assignments and blocks (constants,
  conditional @triton.jit helpers), every function or class with a jit-style
  decorator or a nested kernel -- goes to the foundation's extractor, as the
  kept statements of the same tree (a blanked copy of the text, every line
  number unchanged, is parsed only when a wrapped kernel needs its decorator
  written above it);
* host functions are read by `_HostReader` into the same FileFacts fields the
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

from patterns.core import ast_facts
from patterns.core.facts import _MODULE_ALIASES, FactsError
from patterns.core.facts_types import CallSite, FileFacts, LaunchFacts

# decorators that make (or wrap) a Triton kernel; the extractor decides the rest
_KERNEL_DECORATOR = re.compile(r"(^|\.)(\w*jit|\w*autotune|\w*heuristics|kernel|constexpr_function)$")
_HOST_ANCHORS = re.compile(r"\b(triton|tl|ctypes|CDLL|PyDLL|TensorDescriptor|make_tensor_descriptor|set_allocator)\b")
# a Python file is in scope only if it mentions one of these (cheap byte test before any parse)
SCOPE_TOKENS = (b"triton", b"ctypes")
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
    host: list[ast.AST]  # host functions and methods left out, for _HostReader
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
            # keep the class header and its kernel members; host methods are read by _HostReader
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
            node = copy.copy(node)  # the original keeps its host methods for _HostReader
            node.body = [m for m in node.body if keep[_start(m)]]
        body.append(node)
    return ast.Module(body=body, type_ignores=[])


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else ""
    return ""


_FIELDS: dict[type, tuple[str, ...]] = {}


def _child_nodes(node: ast.AST) -> list[ast.AST]:
    """ast.iter_child_nodes in the same order, without the context and operator leaves."""
    fields = _FIELDS.get(type(node))
    if fields is None:
        fields = _FIELDS[type(node)] = tuple(f for f in node._fields if f not in ("ctx", "op", "ops"))
    out = []
    for name in fields:
        value = getattr(node, name, None)
        if isinstance(value, ast.AST):
            out.append(value)
        elif type(value) is list:
            out.extend(v for v in value if isinstance(v, ast.AST))
    return out


# node types _HostReader handles (visit_<name>); everything else is walked through
_HOST_NODES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Import, ast.ImportFrom, ast.For, ast.AsyncFor, ast.While, ast.Assign, ast.Call)


class _HostReader(ast.NodeVisitor):
    """Host-function facts from the stdlib AST, field for field as patterns.core.facts records them."""

    def __init__(self, source: str, aliases: dict[str, str]):
        self.lines = source.split("\n")
        self.aliases = aliases
        self.calls: list[CallSite] = []
        self.launches: list[LaunchFacts] = []
        self.functions: list[str] = []
        self.assigns: dict[str, dict[str, tuple[int, str]]] = {}
        self._fn: list[str] = []
        self._loops: list[int] = []
        self._origins: list[dict[str, str]] = []
        self._deps: list[dict[str, set[str]]] = []
        self._indent = 0
        self.kernels: set[str] = set()
        self._handlers = {cls: getattr(self, f"visit_{cls.__name__}") for cls in _HOST_NODES}

    def code(self, node: ast.AST) -> str:
        a, b = node.lineno, node.end_lineno or node.lineno
        if a == b:
            return self.lines[a - 1][node.col_offset:node.end_col_offset].strip()
        # continuation lines lose the enclosing block's indentation, as patterns.core.ast_facts prints them
        pad = " " * self._indent

        def dedent(line: str) -> str:
            return line[len(pad):] if line.startswith(pad) else line.lstrip(" ")

        parts = [self.lines[a - 1][node.col_offset:], *map(dedent, self.lines[a:b - 1]), dedent(self.lines[b - 1][:node.end_col_offset])]
        return "\n".join(parts).strip()

    def visit(self, node: ast.AST) -> None:
        # NodeVisitor's dispatch by method name, from a table: host code is most of a wheel
        if isinstance(node, ast.expr):
            self._visit_expression(node)
            return
        handler = self._handlers.get(type(node))
        if isinstance(node, ast.stmt):
            outer, self._indent = self._indent, node.col_offset
            try:
                handler(node) if handler else self.generic_visit(node)
            finally:
                self._indent = outer
        elif handler:
            handler(node)
        else:
            self.generic_visit(node)

    def generic_visit(self, node: ast.AST) -> None:
        for child in _child_nodes(node):
            self.visit(child)

    def _visit_expression(self, node: ast.expr) -> None:
        """The same pre-order walk without recursion: in an expression only calls have a handler."""
        stack = [node]
        while stack:
            n = stack.pop()
            if type(n) is ast.Call and self._fn:
                self._record(n)
            kids = _child_nodes(n)
            kids.reverse()
            stack.extend(kids)

    def qualify(self, name: str) -> str:
        if not name:
            return name
        head, _, rest = name.partition(".")
        full = self.aliases.get(head)
        if full is None:
            return name
        full = _MODULE_ALIASES.get(full, full)
        return f"{full}.{rest}" if rest else full

    # scopes
    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        if _is_kernel_def(node) or node.name in self.kernels:
            return  # the foundation's extractor has it
        self.functions.append(node.name)
        self._fn.append(node.name)
        outer_loops, self._loops = self._loops, []
        self._origins.append({})
        self._deps.append({})
        self.assigns.setdefault(node.name, {})
        for d in node.decorator_list:
            self.visit(d)
        for stmt in node.body:
            self.visit(stmt)
        self._fn.pop()
        self._origins.pop()
        self._deps.pop()
        self._loops = outer_loops

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Import(self, node: ast.Import) -> None:
        for a in node.names:
            local = a.asname or a.name.split(".")[0]
            self.aliases[local] = a.name if a.asname else a.name.split(".")[0]

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.module is None:
            return
        for a in node.names:
            if a.name != "*":
                self.aliases[a.asname or a.name] = f"{node.module}.{a.name}"

    def _loop(self, node: ast.AST, target: ast.AST | None) -> None:
        if target is not None:
            self.visit(node.iter)
        else:
            self.visit(node.test)
        self._loops.append(node.lineno)
        if target is not None:
            self.visit(target)
        for stmt in [*node.body]:
            self.visit(stmt)
        self._loops.pop()
        for stmt in node.orelse:
            self.visit(stmt)

    def visit_For(self, node: ast.For) -> None:
        self._loop(node, node.target)

    visit_AsyncFor = visit_For

    def visit_While(self, node: ast.While) -> None:
        self._loop(node, None)

    def visit_Assign(self, node: ast.Assign) -> None:
        if not self._fn:
            self.generic_visit(node)
            return
        scope = self.assigns[self._fn[-1]]
        origin = self.qualify(_dotted(node.value.func)) if isinstance(node.value, ast.Call) else ""
        deps = self._var_deps(node.value)
        for t in node.targets:
            names = [t] if isinstance(t, ast.Name) else [e for e in getattr(t, "elts", []) if isinstance(e, ast.Name)]
            for n in names:
                scope[n.id] = (node.lineno, self.code(node.value))
                self._deps[-1][n.id] = deps
                if origin:
                    self._origins[-1][n.id] = origin
            if isinstance(t, ast.Tuple):
                for i, el in enumerate(t.elts):
                    if isinstance(el, ast.Name):
                        if isinstance(node.value, ast.Tuple) and len(node.value.elts) == len(t.elts):
                            scope[el.id] = (node.lineno, self.code(node.value.elts[i]))
                        else:
                            scope[el.id] = (node.lineno, f"({self.code(node.value)})[{i}]")
        self.generic_visit(node)  # after recording, as the extractor's visit_Assign does

    def _var_deps(self, node: ast.AST) -> set[str]:
        out: set[str] = set()
        deps = self._deps[-1] if self._deps else {}
        stack = [node]
        while stack:
            n = stack.pop()
            if isinstance(n, ast.Name):
                out.add(n.id)
                out |= deps.get(n.id, set())
            elif isinstance(n, ast.Constant) and (n.value is None or n.value is True or n.value is False):
                out.add(str(n.value))  # patterns.core.ast_facts counts None/True/False as names
            elif isinstance(n, ast.Attribute):
                stack.append(n.value)
                continue
            elif isinstance(n, ast.Call):
                out.update(k.arg for k in n.keywords if k.arg)  # and keyword-argument names
            stack.extend(_child_nodes(n))
        return out

    def visit_Call(self, node: ast.Call) -> None:
        if self._fn:
            self._record(node)
        self.generic_visit(node)

    def _record(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Subscript):
            kernel = _dotted(func.value)
            if not kernel:
                return
            grid_node = func.slice
            dims = len(grid_node.elts) if isinstance(grid_node, ast.Tuple) else 1
            self.launches.append(
                LaunchFacts(
                    kernel=kernel,
                    function=self._fn[-1],
                    line=node.lineno,
                    grid=self.code(grid_node),
                    grid_dims=dims if not isinstance(grid_node, ast.Lambda) else 0,
                    grid_is_callable=isinstance(grid_node, (ast.Lambda, ast.Name)),
                    args=[self.code(a.value if isinstance(a, ast.Starred) else a) for a in node.args]
                    + [self.code(k.value) for k in node.keywords if k.arg is None],
                    kwargs={k.arg: self.code(k.value) for k in node.keywords if k.arg},
                    loops=list(self._loops),
                )
            )
            return
        name = self.qualify(_dotted(func))
        receiver = ""
        origins = self._origins[-1]
        if not name and isinstance(func, ast.Attribute):
            name = "." + func.attr
        elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in origins:
            receiver = origins[func.value.id]
        first = node.args[0] if node.args else None
        deps: set[str] = set()
        for a in [*node.args, *[k.value for k in node.keywords]]:
            deps |= self._var_deps(a)
        self.calls.append(
            CallSite(
                name=name,
                line=node.lineno,
                args=[self.code(a) for a in node.args if not isinstance(a, ast.Starred)],
                kwargs={k.arg: self.code(k.value) for k in node.keywords if k.arg},
                loops=list(self._loops),
                function=self._fn[-1],
                receiver=receiver,
                first_arg_origin=origins.get(first.id, "") if isinstance(first, ast.Name) else "",
                depends_on=sorted(deps),
            )
        )


def _read_host(source: str, host: list[ast.AST], facts: FileFacts, aliases: dict[str, str]) -> None:
    reader = _HostReader(source, dict(facts.imports))
    reader.kernels = {k.name for k in facts.kernels}
    for node in host:
        if isinstance(node, ast.ClassDef):
            for member in node.body:
                reader.visit(member)
        else:
            reader.visit(node)
    facts.imports = reader.aliases
    facts.host_calls = sorted([*facts.host_calls, *reader.calls], key=lambda c: c.line)
    facts.launches = sorted([*facts.launches, *reader.launches], key=lambda la: la.line)
    facts.host_functions = sorted({*facts.host_functions, *reader.functions})
    for fn, assigns in reader.assigns.items():
        facts.host_assigns.setdefault(fn, {}).update(assigns)
    by_kernel = {k.name: k for k in facts.kernels}
    for launch in reader.launches:
        name = launch.kernel.rsplit(".", 1)[-1]
        target = by_kernel.get(aliases.get(name, name))
        if target is not None:
            target.launches.append(launch)


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
        facts = ast_facts.parse(sliced.text, path, sliced.module)
    except RecursionError:
        raise FactsError(f"{path}: cannot parse: nesting too deep") from None
    lines = text.split("\n")
    aliases = {alias: fn for fn, pairs in wrapped_kernels(tree, lines).items() for _, alias in pairs if facts.kernel(fn)}
    _read_host(text, sliced.host, facts, aliases)
    facts.lines = text.count("\n") + 1
    return PyRecord(facts=facts, module=module_name(path), symbols=symbols, kept_lines=sliced.kept_lines, kernel_aliases=aliases)
