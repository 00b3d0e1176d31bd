"""Host functions read into the FileFacts fields the kernel extractor fills for them.

Where host code is most of a file (a whole wheel, for the distiller), recording
everything the kernel extractor keeps per node costs more than host code needs:
this reader fills host_calls, launches, host_assigns and host_functions with the
same normalisation of names, and nothing else.
"""
from __future__ import annotations

import ast
from typing import Callable

from patterns.core.facts.constants import MODULE_ALIASES
from patterns.core.facts_types import CallSite, FileFacts, LaunchFacts


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


class HostReader(ast.NodeVisitor):
    """Host-function facts from the stdlib AST, field for field as the kernel extractor records them."""

    def __init__(self, source: str, aliases: dict[str, str], skip: Callable[[ast.AST], bool] = lambda node: False):
        self.lines = source.split("\n")
        self.aliases = aliases
        self.calls: list[CallSite] = []
        self.launches: list[LaunchFacts] = []
        self.functions: list[str] = []
        self.assigns: dict[str, dict[str, tuple[int, str]]] = {}
        self.defaults: dict[str, dict[str, str]] = {}
        self._fn: list[str] = []
        self._loops: list[int] = []
        self._origins: list[dict[str, str]] = []
        self._deps: list[dict[str, set[str]]] = []
        self._indent = 0
        self.kernels: set[str] = set()
        self.skip = skip  # function definitions the kernel extractor reads
        self._handlers = {cls: getattr(self, f"visit_{cls.__name__}") for cls in _HOST_NODES}

    def code(self, node: ast.AST) -> str:
        a, b = node.lineno, node.end_lineno or node.lineno
        if a == b:
            return self.lines[a - 1][node.col_offset:node.end_col_offset].strip()
        # continuation lines lose the enclosing block's indentation, as the kernel extractor prints them
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
        full = MODULE_ALIASES.get(full, full)
        return f"{full}.{rest}" if rest else full

    # scopes
    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        if self.skip(node) or node.name in self.kernels:
            return  # the foundation's extractor has it
        self.functions.append(node.name)
        self._fn.append(node.name)
        outer_loops, self._loops = self._loops, []
        self._origins.append({})
        self._deps.append({})
        self.assigns.setdefault(node.name, {})
        args = node.args
        positional = [*args.posonlyargs, *args.args]
        pairs = list(zip(positional[len(positional) - len(args.defaults):], args.defaults))
        pairs += [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None]
        self.defaults[node.name] = {a.arg: self.code(d) for a, d in pairs}
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
                out.add(str(n.value))  # the kernel extractor counts None/True/False as names
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


def read_host(source: str, host: list[ast.AST], facts: FileFacts, aliases: dict[str, str],
              skip: Callable[[ast.AST], bool] = lambda node: False) -> None:
    """Add the facts of the host functions (and classes) `host` of `source` to `facts`; `aliases`: launch name -> kernel."""
    reader = HostReader(source, dict(facts.imports), skip)
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
    for fn, defaults in reader.defaults.items():
        if defaults:
            facts.host_defaults.setdefault(fn, {}).update(defaults)
    by_kernel = {k.name: k for k in facts.kernels}
    for launch in reader.launches:
        name = launch.kernel.rsplit(".", 1)[-1]
        target = by_kernel.get(aliases.get(name, name))
        if target is not None:
            target.launches.append(launch)
