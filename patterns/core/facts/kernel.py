"""The extractor: kernel and launcher facts of one file from the standard-library AST.

The stdlib parser is written in C and carries positions on every node, so a file
costs one parse and one walk; a concrete syntax tree with position metadata
(libcst) cost about ten times as much and made whole-wheel distillation slow.
Source text is reported as a concrete syntax tree prints it, so facts read the
same whichever parser made them: an expression keeps its own parentheses, and
its continuation lines lose the indentation of the block it sits in.
"""
from __future__ import annotations

import ast
import bisect
import io
import re
import tokenize
from dataclasses import dataclass, field

from patterns.core.facts.constants import FLOAT_DTYPES, FOLDED_AXIS, JIT_DECORATORS, MODULE_ALIASES, FactsError
from patterns.core.facts_types import (
    AutotuneFacts,
    CallSite,
    FileFacts,
    KernelFacts,
    LaunchFacts,
    LoopFacts,
    Param,
)

# augmented-assignment operators by the names accumulator facts use (`add:<expr>`)
_AUG_OPS = {
    ast.Add: "add", ast.Sub: "subtract", ast.Mult: "multiply", ast.Div: "divide", ast.FloorDiv: "floordivide",
    ast.Mod: "modulo", ast.Pow: "power", ast.LShift: "leftshift", ast.RShift: "rightshift", ast.BitOr: "bitor",
    ast.BitAnd: "bitand", ast.BitXor: "bitxor", ast.MatMult: "matrixmultiply",
}
# words after which `(` opens a parenthesised expression rather than a call's argument list
_KEYWORDS = frozenset({
    "and", "as", "assert", "async", "await", "del", "elif", "else", "except", "for", "from", "if", "import", "in",
    "is", "lambda", "not", "or", "raise", "return", "while", "with", "yield",
})
_SINGLE_STRING = re.compile(r"""[rRbBuU]{0,2}("(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'|\"\"\"[\s\S]*?\"\"\"|'''[\s\S]*?''')""")


def dotted(node: ast.AST | None) -> str:
    """`a.b.c` for Name/Attribute chains ('True', 'None' for those constants), '' for anything else."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = dotted(node.value)
        return f"{base}.{node.attr}" if base else ""
    if isinstance(node, ast.Constant) and (node.value is None or node.value is True or node.value is False):
        return str(node.value)
    return ""


def _word(node: ast.AST) -> str | None:
    """The identifier a node spells (names, keyword-argument names, lambda parameters, True/False/None)."""
    t = type(node)
    if t is ast.Name:
        return node.id
    if t is ast.arg:
        return node.arg
    if t is ast.keyword:
        return node.arg
    if t is ast.Constant and (node.value is None or node.value is True or node.value is False):
        return str(node.value)
    return None


def _children(node: ast.AST) -> list[ast.AST]:
    """Child nodes in source order (ast's field order differs for calls, dicts, conditionals and signatures)."""
    t = type(node)
    if t is ast.Call:
        rest = [*node.args, *node.keywords]
        if node.keywords and any(type(a) is ast.Starred for a in node.args):  # f(k=1, *rest)
            rest.sort(key=lambda n: (n.lineno, n.col_offset))
        return [node.func, *rest]
    if t is ast.Dict:
        out = []
        for k, v in zip(node.keys, node.values):
            if k is not None:
                out.append(k)
            out.append(v)
        return out
    if t is ast.IfExp:
        return [node.body, node.test, node.orelse]
    if t in (ast.FunctionDef, ast.AsyncFunctionDef):
        return [*node.decorator_list, *_signature(node.args), *([node.returns] if node.returns else []), *node.body]
    if t is ast.Lambda:
        return [*_signature(node.args), node.body]
    if t is ast.ClassDef:
        bases = sorted([*node.bases, *node.keywords], key=lambda n: (n.lineno, n.col_offset))
        return [*node.decorator_list, *bases, *node.body]
    fields = _FIELDS.get(t)
    if fields is None:
        fields = _FIELDS[t] = tuple(f for f in t._fields if f not in ("ctx", "op", "ops"))
    out = []
    for name in fields:
        value = getattr(node, name, None)
        if type(value) is list:
            out.extend(v for v in value if v is not None and type(v) is not str)
        elif isinstance(value, ast.AST):
            out.append(value)
    return out


_FIELDS: dict[type, tuple[str, ...]] = {}  # node type -> fields that hold child nodes (and scalars, skipped)


def _signature(args: ast.arguments) -> list[ast.AST]:
    """Parameters with their defaults, in source order."""
    out: list[ast.AST] = []
    positional = [*args.posonlyargs, *args.args]
    first_default = len(positional) - len(args.defaults)
    for i, a in enumerate(positional):
        out.append(a)
        if i >= first_default:
            out.append(args.defaults[i - first_default])
    if args.vararg:
        out.append(args.vararg)
    for a, d in zip(args.kwonlyargs, args.kw_defaults):
        out.append(a)
        if d is not None:
            out.append(d)
    if args.kwarg:
        out.append(args.kwarg)
    return out


@dataclass
class _Arg:
    """One argument of a call as written: `keyword=value`, `*value`, `**value` or `value`."""

    keyword: str | None
    value: ast.expr
    star: str = ""


def _call_args(call: ast.Call) -> list[_Arg]:
    out = [_Arg(None, a.value, "*") if type(a) is ast.Starred else _Arg(None, a) for a in call.args]
    out += [_Arg(k.arg, k.value, "" if k.arg else "**") for k in call.keywords]
    if call.keywords and any(a.star == "*" for a in out):
        out.sort(key=lambda a: (a.value.lineno, a.value.col_offset))
    return out


def _is_string(node: ast.AST, text: str) -> bool:
    """One string literal (not an implicit concatenation, not an f-string)."""
    return type(node) is ast.Constant and isinstance(node.value, str) and _SINGLE_STRING.fullmatch(text) is not None


class _Source:
    """Offsets and source text of nodes, printed the way a concrete syntax tree prints them."""

    def __init__(self, text: str):
        self.text = text
        self.lines = text.split("\n")
        self.starts = [0]
        for line in self.lines[:-1]:
            self.starts.append(self.starts[-1] + len(line) + 1)

    def _offset(self, lineno: int, col: int) -> int:
        line = self.lines[lineno - 1]
        if not line.isascii():  # ast columns count UTF-8 bytes
            col = len(line.encode("utf-8")[:col].decode("utf-8", "replace"))
        return self.starts[lineno - 1] + col

    def span(self, node: ast.AST) -> tuple[int, int]:
        return self._offset(node.lineno, node.col_offset), self._offset(node.end_lineno, node.end_col_offset)

    def segment(self, node: ast.AST) -> str:
        s, e = self.span(node)
        return self.text[s:e]

    def _before(self, pos: int) -> int:
        """Index of the last code character before `pos` (whitespace, line continuations and comments skipped), -1 if none."""
        text = self.text
        i = pos - 1
        while i >= 0:
            ch = text[i]
            if ch in " \t\f\r\\":
                i -= 1
            elif ch == "\n":  # into the line that ends here, before its comment
                k = bisect.bisect_right(self.starts, i) - 1
                i = self.starts[k] + _comment_start(self.lines[k]) - 1
            else:
                return i
        return -1

    def _after(self, pos: int) -> int:
        text = self.text
        i, n = pos, len(text)
        while i < n:
            ch = text[i]
            if ch in " \t\f\r\n\\":
                i += 1
            elif ch == "#":
                j = text.find("\n", i)
                i = n if j < 0 else j
            else:
                return i
        return n

    def _opens_call(self, paren: int) -> bool:
        """Whether the `(` at `paren` starts an argument list (`f(`, `x)(`, `def f(`) rather than a group."""
        j = self._before(paren)
        if j < 0:
            return False
        ch = self.text[j]
        if ch in ")]":
            return True
        if not (ch.isalnum() or ch == "_"):
            return False
        k = j
        while k > 0 and (self.text[k - 1].isalnum() or self.text[k - 1] == "_"):
            k -= 1
        return self.text[k:j + 1] not in _KEYWORDS

    def outer_span(self, node: ast.AST) -> tuple[int, int]:
        """The node's span with the parentheses that belong to it (`(a + b)` in `(a + b) * c`)."""
        s, e = self.span(node)
        if type(node) is ast.GeneratorExp and self.text[s] == "(" and self._opens_call(s):
            return s + 1, e - 1  # `f(x for x in y)`: the parentheses are the call's
        while True:
            p, q = self._before(s), self._after(e)
            if p < 0 or q >= len(self.text) or self.text[p] != "(" or self.text[q] != ")" or self._opens_call(p):
                return s, e
            s, e = p, q + 1

    def code(self, node: ast.AST, pad: str) -> str:
        """Source text of an expression; `pad` is the indentation of the block it sits in."""
        s, e = self.outer_span(node)
        text = self.text[s:e]
        if "\n" not in text:
            return text.strip()
        lines = text.split("\n")
        verbatim = _verbatim_lines(text) if ('"""' in text or "'''" in text or "\\\n" in text) else ()
        for i in range(1, len(lines)):
            if i not in verbatim and pad and lines[i].startswith(pad):
                lines[i] = lines[i][len(pad):]
        return "\n".join(lines).strip()


def _comment_start(line: str) -> int:
    """Index of a line's `#` comment (outside string literals), or its length."""
    if "#" not in line:
        return len(line)
    quote = ""
    i = 0
    while i < len(line):
        ch = line[i]
        if quote:
            if ch == "\\":
                i += 1
            elif line.startswith(quote, i):
                i += len(quote) - 1
                quote = ""
        elif ch in "'\"":
            quote = line[i:i + 3] if line.startswith(ch * 3, i) else ch
            i += len(quote) - 1
        elif ch == "#":
            return i
        i += 1
    return len(line)


def _verbatim_lines(text: str) -> set[int]:
    """0-based lines of a multi-line expression that keep their indentation: inside a string, or after a backslash."""
    out: set[int] = set()
    lines = text.split("\n")
    comment_rows: set[int] = set()
    try:
        for tok in tokenize.generate_tokens(io.StringIO("(" + text + ")").readline):
            if tok.type == tokenize.STRING and tok.end[0] > tok.start[0]:
                out.update(range(tok.start[0], tok.end[0]))  # token rows are 1-based: rows after the first
            elif tok.type == tokenize.COMMENT:
                comment_rows.add(tok.start[0] - 1)
    except (tokenize.TokenError, SyntaxError):
        pass
    for i in range(1, len(lines)):
        if lines[i - 1].rstrip("\r").endswith("\\") and (i - 1) not in comment_rows:
            out.add(i)
    return out


@dataclass
class _Scope:
    """Per-function state while walking a kernel or a host function."""

    name: str
    loops: list[LoopFacts] = field(default_factory=list)
    loop_stack: list[int] = field(default_factory=list)
    calls: list[CallSite] = field(default_factory=list)
    # variable -> dotted name of the call that produced it (tl.make_block_ptr, ...)
    origins: dict[str, str] = field(default_factory=dict)
    # variable -> dtype name where it can be read from the code
    dtypes: dict[str, str] = field(default_factory=dict)
    # variable -> program_id axes its value depends on (taint through assignments)
    pid_deps: dict[str, set[int]] = field(default_factory=dict)
    assigns: dict[str, tuple[int, str]] = field(default_factory=dict)
    first_assigns: dict[str, tuple[int, str]] = field(default_factory=dict)
    accumulates: dict[str, list[str]] = field(default_factory=dict)
    accumulate_lines: dict[str, list[int]] = field(default_factory=dict)
    assign_exprs: dict[str, list[tuple[int, str]]] = field(default_factory=dict)
    # variable -> every variable its value derives from, transitively
    var_deps: dict[str, set[str]] = field(default_factory=dict)
    # variables whose value derives from a load from memory
    loaded: set[str] = field(default_factory=set)


@dataclass
class _Reach:
    """What an expression mentions, read in one walk and kept per node (an assignment's value is read three times).

    `names`: identifiers a dependency walk meets (attribute names excluded);
    `all_names`: every identifier; `pid_names`: identifiers outside
    `tl.program_id(...)` calls, whose constant axes are `pid_axes`.
    """

    names: set[str] = field(default_factory=set)
    all_names: set[str] = field(default_factory=set)
    pid_names: set[str] = field(default_factory=set)
    pid_axes: set[int] = field(default_factory=set)
    loads: bool = False  # a tl.load call
    method_loads: bool = False  # x.load(...) / x.gather(...)


class _Extractor:
    def __init__(self, src: _Source, path: str):
        self.src = src
        self.path = path
        self.aliases: dict[str, str] = {}
        self.kernels: list[KernelFacts] = []
        self.launches: list[LaunchFacts] = []
        self.host_calls: list[CallSite] = []
        self.host_functions: dict[str, tuple[int, int]] = {}
        self.constants: dict[str, str] = {}
        self.module_calls: list[CallSite] = []
        self.host_assigns: dict[str, dict[str, tuple[int, str]]] = {}
        self.host_defaults: dict[str, dict[str, str]] = {}
        self.jit_names: set[str] = set()  # module names bound to triton.jit (`my_jit = triton.jit`, wrappers)
        self.jit_wrapped: dict[str, str] = {}  # function -> the name `g = triton.jit(f)` binds
        self.pid_wrappers: dict[str, str] = {}  # @triton.jit function returning tl.program_id(a) -> "tl.program_id"
        self._scopes: list[_Scope] = []
        self._kernel_stack: list[KernelFacts | None] = []
        self._pad = ""
        self._reach: dict[int, _Reach] = {}  # id(node) -> _Reach; cleared when the import aliases change

    # -- walking ---------------------------------------------------------------
    def visit(self, node: ast.AST) -> None:
        t = type(node)
        if isinstance(node, ast.expr):
            self._visit_expression(node)
            return
        outer_pad = self._pad
        if isinstance(node, ast.stmt):
            line = self.src.lines[node.lineno - 1]
            self._pad = line[: len(line) - len(line.lstrip(" \t\f"))]
        enter = _ENTER.get(t)
        if enter is not None:
            enter(self, node)
        for child in _children(node):
            self.visit(child)
        leave = _LEAVE.get(t)
        if leave is not None:
            leave(self, node)
        self._pad = outer_pad

    def _visit_expression(self, node: ast.expr) -> None:
        """The same pre-order walk without recursion: in an expression only calls have a hook."""
        stack = [node]
        while stack:
            n = stack.pop()
            if type(n) is ast.Call:
                self.enter_Call(n)
            kids = _children(n)
            kids.reverse()
            stack.extend(kids)

    # -- helpers ---------------------------------------------------------------
    def code(self, node: ast.AST) -> str:
        return self.src.code(node, self._pad)

    def _qualify(self, name: str) -> str:
        """Normalise a dotted name through the file's import aliases."""
        if not name:
            return name
        head, _, rest = name.partition(".")
        if not rest and head in self.pid_wrappers:
            return self.pid_wrappers[head]
        full = self.aliases.get(head)
        if full is None:
            return name
        full = MODULE_ALIASES.get(full, full)
        full = f"{full}.{rest}" if rest else full
        # an imported wrapper of the grid intrinsics (flag_gems' `tle.program_id(0)`, which returns
        # `tl.program_id(axis).to(tl.int64)`): the program id, whatever module re-exports it
        module, _, leaf = full.rpartition(".")
        if leaf in _GRID_INTRINSICS and module and module != "tl":
            return f"tl.{leaf}"
        return full

    def _alias(self, local: str, full: str) -> None:
        self.aliases[local] = full
        self._reach.clear()  # `tl.load` / `tl.program_id` may now read differently

    @property
    def in_kernel(self) -> bool:
        return bool(self._kernel_stack) and self._kernel_stack[-1] is not None

    # -- imports ---------------------------------------------------------------
    def enter_Import(self, node: ast.Import) -> None:
        for a in node.names:
            local = a.asname or a.name.split(".")[0]
            self._alias(local, a.name if a.asname else a.name.split(".")[0])

    def enter_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.module is None:
            return
        for a in node.names:
            if a.name == "*":
                continue
            full = f"{node.module}.{a.name}"
            # `from pkg.triton_utils import tl, triton`: re-exports, named as Triton names them
            if not node.module.startswith("triton") and a.name in ("tl", "triton", "libdevice"):
                full = {"tl": "triton.language", "triton": "triton", "libdevice": "triton.language.extra.libdevice"}[a.name]
            self._alias(a.asname or a.name, full)

    # -- functions -------------------------------------------------------------
    def enter_FunctionDef(self, node: ast.FunctionDef) -> None:
        decorators = []
        for dec in node.decorator_list:
            expr = dec.func if isinstance(dec, ast.Call) else dec
            decorators.append((self._qualify(dotted(expr)), dec))
        names = [n for n, _ in decorators]
        if node.name in self.jit_wrapped and not self._scopes:
            names.append("triton.jit")  # `f = triton.jit(f)` further down the module
        if any(n in JIT_DECORATORS or n.endswith(".jit") or n in self.jit_names for n in names):
            facts = KernelFacts(
                name=node.name,
                path=self.path,
                line=node.lineno,
                end_line=node.end_lineno,
                decorators=names,
                params=self._params(node),
                docstring=(ast.get_docstring(node) or "").strip(),
            )
            for name, dec in decorators:
                self._decorator_facts(facts, name, dec)
            self.kernels.append(facts)
            self._kernel_stack.append(facts)
        else:
            # `def grid(meta): return (...)` inside a launcher: the grid, as the lambda it is
            parent = self._scopes[-1] if self._scopes else None
            body = [b for b in node.body if not (isinstance(b, ast.Expr) and isinstance(b.value, ast.Constant))]
            if (parent is not None and (not self._kernel_stack or self._kernel_stack[-1] is None) and len(body) == 1
                    and isinstance(body[0], ast.Return) and body[0].value is not None):
                args = ", ".join(a.arg for a in node.args.args)
                parent.assigns[node.name] = (node.lineno, f"lambda {args}: {self.code(body[0].value)}")
            self._kernel_stack.append(None)
            self.host_functions[node.name] = (node.lineno, node.end_lineno)
            defaults = {p.name: p.default for p in self._params(node) if p.default is not None}
            if defaults:
                self.host_defaults[node.name] = defaults
        self._scopes.append(_Scope(node.name))

    def enter_Return(self, node: ast.Return) -> None:
        kernel = self._kernel_stack[-1] if self._kernel_stack else None
        if kernel is not None and node.value is not None:
            kernel.returns_value = True

    def leave_FunctionDef(self, node: ast.FunctionDef) -> None:
        scope = self._scopes.pop()
        kernel = self._kernel_stack.pop()
        if kernel is not None:
            kernel.calls = scope.calls
            kernel.loops = scope.loops
            kernel.dtypes = dict(scope.dtypes)
            kernel.origins = dict(scope.origins)
            kernel.pid_deps = {k: sorted(v) for k, v in scope.pid_deps.items() if v}
            kernel.assigns = dict(scope.assigns)
            kernel.first_assigns = {v: a for v, a in scope.first_assigns.items() if a != scope.assigns.get(v)}
            kernel.accumulates = dict(scope.accumulates)
            kernel.accumulate_lines = dict(scope.accumulate_lines)
            kernel.assign_history = {v: a for v, a in scope.assign_exprs.items() if len(a) > 1}
            kernel.loaded = sorted(scope.loaded)
        else:
            self.host_calls.extend(scope.calls)
            self.host_assigns[scope.name] = dict(scope.assigns)

    def _params(self, node: ast.FunctionDef) -> list[Param]:
        a = node.args
        positional = [*a.posonlyargs, *a.args]
        defaults: dict[int, ast.expr] = {id(p): d for p, d in zip(positional[len(positional) - len(a.defaults):], a.defaults)}
        defaults.update({id(p): d for p, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None})
        params = []
        for p in [*positional, *a.kwonlyargs]:
            ann = self.code(p.annotation) if p.annotation else ""
            default = defaults.get(id(p))
            params.append(Param(name=p.arg, constexpr=ann.endswith("constexpr"), annotation=ann,
                                default=self.code(default) if default is not None else None))
        return params

    def _decorator_facts(self, facts: KernelFacts, name: str, dec: ast.expr) -> None:
        if not isinstance(dec, ast.Call):
            return
        args = _call_args(dec)
        kwargs = {a.keyword: a.value for a in args if a.keyword}
        if name.endswith("autotune"):
            configs_node = kwargs.get("configs") or (args[0].value if args and not args[0].keyword else None)
            configs = []
            if isinstance(configs_node, (ast.List, ast.Tuple)):
                for el in configs_node.elts:
                    configs.append(self._config(el.value if type(el) is ast.Starred else el))
            elif configs_node is not None:  # list comprehension or a name: count unknown
                configs.append({"source": self.code(configs_node)})
            key_node = kwargs.get("key")
            keys = []
            if isinstance(key_node, (ast.List, ast.Tuple)):
                for el in key_node.elts:
                    el = el.value if type(el) is ast.Starred else el
                    text = self.src.segment(el)
                    keys.append(el.value if _is_string(el, text) else self.code(el))
            facts.autotune = AutotuneFacts(
                line=dec.lineno, configs=configs, key=keys, generated=not isinstance(configs_node, (ast.List, ast.Tuple))
            )
        elif name.endswith("heuristics"):
            arg = args[0].value if args else None
            if isinstance(arg, ast.Dict):
                for k, v in zip(arg.keys, arg.values):
                    if k is not None and _is_string(k, self.src.segment(k)):
                        facts.heuristics[k.value] = self.code(v)
        elif name.endswith("jit"):
            for key, value in kwargs.items():
                facts.jit_kwargs[key] = self.code(value)

    def _config(self, node: ast.expr) -> dict[str, str]:
        out: dict[str, str] = {}
        if not isinstance(node, ast.Call):
            return {"source": self.code(node)}
        for i, arg in enumerate(_call_args(node)):
            if arg.keyword:
                out[arg.keyword] = self.code(arg.value)
            elif i == 0 and isinstance(arg.value, ast.Dict):
                d = arg.value
                for k, v in zip(d.keys, d.values):
                    if k is not None and _is_string(k, self.src.segment(k)):
                        out[k.value] = self.code(v)
        return out

    # -- loops -----------------------------------------------------------------
    def enter_For(self, node: ast.For) -> None:
        if not self._scopes:
            return
        scope = self._scopes[-1]
        it = node.iter
        kind, kwargs = "iter", {}
        args: list[str] = []
        start_axes: set[int] = set()
        if isinstance(it, ast.Call):
            kind = self._qualify(dotted(it.func)) or "call"
            call_args = _call_args(it)
            kwargs = {a.keyword: self.code(a.value) for a in call_args if a.keyword}
            positional = [a.value for a in call_args if not a.keyword and a.star == ""]
            args = [self.code(a) for a in positional]
            if len(positional) >= 2:  # range(start, stop[, step]): a start of 0 is implied otherwise
                start_axes = self._pid_deps(positional[0], scope)
        stages = kwargs.get("num_stages")
        loop = LoopFacts(
            line=node.lineno,
            end_line=node.end_lineno,
            kind=kind,
            target=self.code(node.target),
            iter=self.code(it),
            num_stages=int(stages) if stages and stages.isdigit() else None,
            kwargs=kwargs,
            depth=len(scope.loop_stack),
            args=args,
            start_pid_axes=sorted(start_axes),
        )
        scope.loops.append(loop)
        scope.loop_stack.append(loop.line)
        self._mark_assigned(scope, node.target)
        deps = self._pid_deps(it, scope)
        vdeps = self._var_deps(it, scope)
        for n in [node.target, *[_unstar(e) for e in getattr(node.target, "elts", [])]]:
            if isinstance(n, ast.Name):
                scope.pid_deps[n.id] = deps
                scope.var_deps[n.id] = vdeps

    def leave_For(self, node: ast.For) -> None:
        if self._scopes:
            self._scopes[-1].loop_stack.pop()

    def _mark_assigned(self, scope: _Scope, target: ast.expr) -> None:
        """Record names bound by `target` in every loop that encloses it."""
        if not scope.loop_stack:
            return
        names = []
        stack = [target]
        while stack:
            n = stack.pop()
            if isinstance(n, ast.Name):
                names.append(n.id)
            elif isinstance(n, (ast.Tuple, ast.List)):
                stack.extend(_unstar(e) for e in n.elts)
        enclosing = set(scope.loop_stack)
        for lp in scope.loops:
            if lp.line in enclosing:
                lp.assigned.extend(n for n in names if n not in lp.assigned)

    def enter_While(self, node: ast.While) -> None:
        if not self._scopes:
            return
        scope = self._scopes[-1]
        loop = LoopFacts(
            line=node.lineno, end_line=node.end_lineno, kind="while", target="", iter=self.code(node.test),
            depth=len(scope.loop_stack),
        )
        scope.loops.append(loop)
        scope.loop_stack.append(loop.line)

    def leave_While(self, node: ast.While) -> None:
        if self._scopes:
            self._scopes[-1].loop_stack.pop()

    # -- assignments: origins and dtypes ---------------------------------------
    def enter_Assign(self, node: ast.Assign) -> None:
        if not self._scopes:
            # module-level names (CP_DOT_PRECISION = tl.constexpr('tf32x3')) are
            # kept as source text so predicates can read constants passed by name
            for t in node.targets:
                if isinstance(t, ast.Name):
                    self.constants[t.id] = self.code(node.value)
            return
        targets = []
        for t in node.targets:
            if isinstance(t, ast.Name):
                targets.append(t.id)
            elif isinstance(t, ast.Tuple):
                targets.extend(e.id for e in map(_unstar, t.elts) if isinstance(e, ast.Name))
        scope = self._scopes[-1]
        value = node.value
        for t in node.targets:
            self._mark_assigned(scope, t)
        self._assign_deps(node, scope)
        origin = self._origin(value)
        dtype = self._dtype(value, scope)
        for name in targets:
            scope.assigns[name] = (node.lineno, self.code(value))
            scope.first_assigns.setdefault(name, scope.assigns[name])
            if len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                scope.assign_exprs.setdefault(name, []).append(scope.assigns[name])
        # `B, T, H, K = q.shape` -> B: (q.shape)[0], ...; `a, b = x, y` -> pairwise
        for t in node.targets:
            if isinstance(t, ast.Tuple):
                for i, el in enumerate(map(_unstar, t.elts)):
                    if isinstance(el, ast.Name):
                        if isinstance(value, ast.Tuple) and len(value.elts) == len(t.elts):
                            scope.assigns[el.id] = (node.lineno, self.code(_unstar(value.elts[i])))
                        else:
                            scope.assigns[el.id] = (node.lineno, f"({self.code(value)})[{i}]")
        for name in targets:
            if origin:
                scope.origins[name] = origin  # p = tl.advance(p, ...) keeps its origin through _origin
            if dtype:
                scope.dtypes[name] = dtype

    def _assign_deps(self, node: ast.Assign, scope: _Scope) -> None:
        value = node.value
        for tgt in node.targets:
            if isinstance(tgt, ast.Tuple) and isinstance(value, ast.Tuple) and len(tgt.elts) == len(value.elts):
                for el, v in zip(tgt.elts, value.elts):
                    el, v = _unstar(el), _unstar(v)
                    if isinstance(el, ast.Name):
                        scope.pid_deps[el.id] = self._pid_deps(v, scope)
                        scope.var_deps[el.id] = self._var_deps(v, scope)
            else:
                deps = self._pid_deps(value, scope)
                vdeps = self._var_deps(value, scope)
                names = [tgt] if isinstance(tgt, ast.Name) else [_unstar(e) for e in getattr(tgt, "elts", [])]
                for n in names:
                    if isinstance(n, ast.Name):
                        scope.pid_deps[n.id] = deps
                        scope.var_deps[n.id] = vdeps

    def reach(self, node: ast.AST) -> _Reach:
        """What `node` mentions (kept per node: an assignment's value is asked for three times)."""
        key = id(node)
        r = self._reach.get(key)
        if r is not None:
            return r
        r = _Reach()
        names, all_names, pid_names = r.names, r.all_names, r.pid_names
        stack = [(node, False)]  # (node, inside a tl.program_id call)
        while stack:
            n, in_pid = stack.pop()
            t = type(n)
            if t is ast.BinOp and type(n.op) is ast.Mod and not in_pid:
                axis = self._pid_axis(n.left)
                if axis is not None:  # `tl.program_id(a) % n`: tiles folded into axis a, its fast part
                    r.pid_axes.add(axis + FOLDED_AXIS)
                    stack.append((n.right, in_pid))
                    continue
            if t is ast.Attribute:  # `tl.float32` depends on tl; the attribute name is met by the full walks only
                all_names.add(n.attr)
                if not in_pid:
                    pid_names.add(n.attr)
                stack.append((n.value, in_pid))
                continue
            word = _word(n)
            if word:
                names.add(word)
                all_names.add(word)
                if not in_pid:
                    pid_names.add(word)
            elif t is ast.Call:
                name = self._qualify(dotted(n.func))
                if name == "tl.load":
                    r.loads = True
                elif name == "tl.program_id" and not in_pid:
                    args = _call_args(n)
                    axis = args[0].value if args else None
                    if type(axis) is ast.Constant and type(axis.value) is int:
                        r.pid_axes.add(int(self.src.segment(axis)))
                    in_pid = True  # the axis is the dependency; nothing inside is followed
                if type(n.func) is ast.Attribute and n.func.attr in ("load", "gather"):
                    r.method_loads = True
            stack.extend((c, in_pid) for c in _children(n))
        self._reach[key] = r
        return r

    def _pid_axis(self, node: ast.AST) -> int | None:
        """The axis of `tl.program_id(a)` or `tl.program_id(a).to(...)`, else None."""
        if type(node) is ast.Call and type(node.func) is ast.Attribute and node.func.attr == "to":
            node = node.func.value
        if type(node) is ast.Call and self._qualify(dotted(node.func)) == "tl.program_id":
            args = _call_args(node)
            axis = args[0].value if args else None
            if type(axis) is ast.Constant and type(axis.value) is int:
                return axis.value
        return None

    def _pid_deps(self, node: ast.AST, scope: _Scope) -> set[int]:
        """program_id axes an expression depends on, through earlier assignments."""
        r = self.reach(node)
        out = set(r.pid_axes)
        deps = scope.pid_deps
        for n in r.pid_names:
            got = deps.get(n)
            if got:
                out |= got
        return out

    def _var_deps(self, node: ast.AST, scope: _Scope) -> set[str]:
        """Variables an expression derives from, through earlier assignments."""
        r = self.reach(node)
        out = set(r.names)
        deps = scope.var_deps
        for n in r.names:
            got = deps.get(n)
            if got:
                out |= got
        return out

    def enter_AugAssign(self, node: ast.AugAssign) -> None:
        if not self._scopes:
            return
        scope = self._scopes[-1]
        self._mark_assigned(scope, node.target)
        if isinstance(node.target, ast.Name):
            name = node.target.id
            scope.var_deps.setdefault(name, set()).update(self._var_deps(node.value, scope))
            scope.pid_deps.setdefault(name, set()).update(self._pid_deps(node.value, scope))
            dtype = self._dtype(node.value, scope)
            if dtype and name not in scope.dtypes:
                scope.dtypes[name] = dtype
            # accumulators (b_sq += b_x * b_x) tell what a loop reduces
            scope.accumulates.setdefault(name, []).append(f"{_AUG_OPS[type(node.op)]}:{self.code(node.value)}")
            scope.accumulate_lines.setdefault(name, []).append(node.lineno)

    def _origin(self, value: ast.expr) -> str:
        if isinstance(value, ast.Call):
            name = self._qualify(dotted(value.func))
            if name in ("tl.advance",):
                args = _call_args(value)
                if args and isinstance(args[0].value, ast.Name) and self._scopes:
                    return self._scopes[-1].origins.get(args[0].value.id, "")
            return name
        return ""

    def _dtype(self, value: ast.expr, scope: _Scope) -> str:
        """Best-effort dtype of an expression; '' when it cannot be read."""
        if isinstance(value, ast.Call):
            func = value.func
            name = self._qualify(dotted(func))
            args = _call_args(value)
            kw = {a.keyword: a.value for a in args if a.keyword}
            if isinstance(func, ast.Attribute) and func.attr == "to" and args:
                return _dtype_name(self._qualify(dotted(args[0].value)))
            if name in ("tl.zeros", "tl.full", "tl.zeros_like", "tl.full_like") and "dtype" in kw:
                return _dtype_name(self._qualify(dotted(kw["dtype"])))
            if name == "tl.dot":
                return _dtype_name(self._qualify(dotted(kw["out_dtype"]))) if "out_dtype" in kw else "float32"
            if name in ("tl.exp", "tl.exp2", "tl.log", "tl.log2", "tl.sqrt", "tl.rsqrt", "tl.sigmoid", "tl.sum", "tl.max", "tl.where") and args:
                # elementwise math keeps the operand's dtype
                return self._dtype(args[-1].value if name == "tl.where" else args[0].value, scope)
        if isinstance(value, ast.Name):
            return scope.dtypes.get(value.id, "")
        if isinstance(value, ast.BinOp):
            left, right = self._dtype(value.left, scope), self._dtype(value.right, scope)
            return left or right
        if isinstance(value, ast.UnaryOp):
            return self._dtype(value.operand, scope)
        if isinstance(value, ast.Subscript):
            return self._dtype(value.value, scope)
        return ""

    # -- calls and launches ----------------------------------------------------
    def _reads_memory(self, node: ast.AST, scope: _Scope) -> bool:
        """Whether an expression loads from memory (tl.load, desc.load) or uses a loaded variable."""
        r = self.reach(node)
        return r.loads or (r.method_loads and self.in_kernel) or not scope.loaded.isdisjoint(r.all_names)

    def _track_loaded(self, targets: list[ast.expr], value: ast.AST, scope: _Scope, augmented: bool = False) -> None:
        reads = self._reads_memory(value, scope)
        stack = list(targets)
        while stack:
            n = stack.pop()
            if isinstance(n, ast.Name):
                if reads:
                    scope.loaded.add(n.id)
                elif not augmented:
                    scope.loaded.discard(n.id)
            elif isinstance(n, (ast.Tuple, ast.List)):
                stack.extend(_unstar(e) for e in n.elts)

    def leave_Assign(self, node: ast.Assign) -> None:
        if self._scopes:
            self._track_loaded(node.targets, node.value, self._scopes[-1])

    def leave_AugAssign(self, node: ast.AugAssign) -> None:
        if self._scopes:
            self._track_loaded([node.target], node.value, self._scopes[-1], augmented=True)

    def _module_call(self, node: ast.Call) -> None:
        """A call outside any function: `_lib = ctypes.CDLL(None)`, `triton.set_allocator(...)`."""
        if isinstance(node.func, ast.Subscript):
            return
        name = self._qualify(dotted(node.func))
        if not name and isinstance(node.func, ast.Attribute):
            name = "." + node.func.attr
        args = _call_args(node)
        self.module_calls.append(
            CallSite(
                name=name,
                line=node.lineno,
                args=[self.code(a.value) for a in args if not a.keyword and a.star == ""],
                kwargs={a.keyword: self.code(a.value) for a in args if a.keyword},
            )
        )

    def enter_Call(self, node: ast.Call) -> None:
        if not self._scopes:
            self._module_call(node)
            return
        scope = self._scopes[-1]
        func = node.func
        # kernel[grid](...) launch
        if isinstance(func, ast.Subscript) and not self.in_kernel:
            self._launch(node, func, scope)
            return
        name = self._qualify(dotted(func))
        receiver = ""
        if not name and isinstance(func, ast.Attribute):
            name = "." + func.attr  # method on an expression: x.to(...)
        elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in scope.origins:
            receiver = scope.origins[func.value.id]  # desc.load(...) on a tensor descriptor
        call_args = _call_args(node)
        args = [self.code(a.value) for a in call_args if not a.keyword and a.star == ""]
        kwargs = {a.keyword: self.code(a.value) for a in call_args if a.keyword}
        operand_dtypes = []
        if name == "tl.dot":
            operand_dtypes = [self._dtype(a.value, scope) for a in call_args[:2] if not a.keyword]
        first_origin = ""
        if call_args and isinstance(call_args[0].value, ast.Name):
            first_origin = scope.origins.get(call_args[0].value.id, "")
        pid_axes: set[int] = set()
        depends: set[str] = set()
        for a in call_args:
            pid_axes |= self._pid_deps(a.value, scope)
            depends |= self._var_deps(a.value, scope)
        scope.calls.append(
            CallSite(
                name=name,
                line=node.lineno,
                args=args,
                kwargs=kwargs,
                loops=list(scope.loop_stack),
                function=scope.name,
                receiver=receiver,
                first_arg_origin=first_origin,
                operand_dtypes=operand_dtypes,
                pid_axes=sorted(pid_axes),
                depends_on=sorted(depends),
            )
        )

    def _launch(self, node: ast.Call, func: ast.Subscript, scope: _Scope) -> None:
        kernel = dotted(func.value)
        if not kernel:
            return
        grid_node: ast.expr | None = func.slice
        if isinstance(grid_node, ast.Tuple) and grid_node.elts and not self._parenthesized(grid_node):
            grid_node = grid_node.elts[0]  # k[a, b]: two subscript elements, the first one is the grid
        if isinstance(grid_node, ast.Slice):
            grid_node = None
        grid = self.code(grid_node) if grid_node is not None else ""
        dims = len(grid_node.elts) if isinstance(grid_node, ast.Tuple) else (1 if grid_node is not None else 0)
        call_args = _call_args(node)
        self.launches.append(
            LaunchFacts(
                kernel=kernel,
                function=scope.name,
                line=node.lineno,
                grid=grid,
                grid_dims=dims if not isinstance(grid_node, ast.Lambda) else 0,
                grid_is_callable=isinstance(grid_node, (ast.Lambda, ast.Name)),
                args=[self.code(a.value) for a in call_args if not a.keyword],
                kwargs={a.keyword: self.code(a.value) for a in call_args if a.keyword},
                loops=list(scope.loop_stack),
            )
        )

    def _parenthesized(self, t: ast.Tuple) -> bool:
        return self.src.outer_span(t.elts[0])[0] > self.src.span(t)[0]


def _unstar(node: ast.expr) -> ast.expr:
    return node.value if type(node) is ast.Starred else node


_ENTER = {
    ast.Import: _Extractor.enter_Import,
    ast.ImportFrom: _Extractor.enter_ImportFrom,
    ast.FunctionDef: _Extractor.enter_FunctionDef,
    ast.AsyncFunctionDef: _Extractor.enter_FunctionDef,
    ast.For: _Extractor.enter_For,
    ast.AsyncFor: _Extractor.enter_For,
    ast.While: _Extractor.enter_While,
    ast.Assign: _Extractor.enter_Assign,
    ast.AugAssign: _Extractor.enter_AugAssign,
    ast.Call: _Extractor.enter_Call,
    ast.Return: _Extractor.enter_Return,
}
_LEAVE = {
    ast.FunctionDef: _Extractor.leave_FunctionDef,
    ast.AsyncFunctionDef: _Extractor.leave_FunctionDef,
    ast.For: _Extractor.leave_For,
    ast.AsyncFor: _Extractor.leave_For,
    ast.While: _Extractor.leave_While,
    ast.Assign: _Extractor.leave_Assign,
    ast.AugAssign: _Extractor.leave_AugAssign,
}


def _dtype_name(name: str) -> str:
    short = name.rsplit(".", 1)[-1]
    return short if short in FLOAT_DTYPES or short.startswith(("int", "uint", "float")) else ""


def _is_jit(node: ast.expr | None) -> bool:
    """`triton.jit`, `jit`, `pkg.jit`, `triton.jit(...)` with options, `triton.autotune(...)`."""
    if isinstance(node, ast.Call) and not node.args:
        node = node.func
    name = dotted(node) if node is not None else ""
    return name.rsplit(".", 1)[-1] in ("jit", "autotune", "heuristics") and bool(name)


_GRID_INTRINSICS = ("program_id", "num_programs")


def _grid_wrapper(fn: ast.FunctionDef) -> str | None:
    """`tl.program_id` / `tl.num_programs` when a @triton.jit function only returns that intrinsic of
    its argument (`return tl.program_id(axis).to(tl.int64)`), else None."""
    if not fn.decorator_list or not any(_is_jit(d) for d in fn.decorator_list) or len(fn.args.args) != 1:
        return None
    rets = [n for n in ast.walk(fn) if isinstance(n, ast.Return)]
    leaves = set()
    for r in rets:
        v = r.value
        while isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) and v.func.attr in ("to", "cast"):
            v = v.func.value  # `.to(tl.int64)`
        if not isinstance(v, ast.Call):
            return None
        leaf = dotted(v.func).rsplit(".", 1)[-1]
        if leaf not in _GRID_INTRINSICS or not (v.args and isinstance(v.args[0], ast.Name) and v.args[0].id == fn.args.args[0].arg):
            return None
        leaves.add(leaf)
    return f"tl.{leaves.pop()}" if len(leaves) == 1 else None


def _module_jit(ex: "_Extractor", tree: ast.Module) -> None:
    """Kernels made without a decorator line: `f = triton.jit(f)`, `my_jit = triton.jit`,
    `def my_jit(fn): return triton.jit(fn)` used as `@my_jit`; and @triton.jit wrappers of the grid
    intrinsics, read as the intrinsic at their call sites."""
    for stmt in tree.body:
        if isinstance(stmt, ast.FunctionDef) and (wrapped := _grid_wrapper(stmt)):
            ex.pid_wrappers[stmt.name] = wrapped
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            target, value = stmt.targets[0].id, stmt.value
            if _is_jit(value):
                ex.jit_names.add(target)
            elif isinstance(value, ast.Call) and value.args and isinstance(value.args[0], ast.Name) and (_is_jit(value.func) or (
                    isinstance(value.func, ast.Call) and _is_jit(value.func.func))):
                ex.jit_wrapped[value.args[0].id] = target
        elif isinstance(stmt, ast.FunctionDef) and not stmt.decorator_list:
            rets = [n for n in ast.walk(stmt) if isinstance(n, ast.Return) and isinstance(n.value, ast.Call)]
            if stmt.args.args and rets and all(_is_jit(r.value.func) or (isinstance(r.value.func, ast.Call) and _is_jit(r.value.func.func)) for r in rets):
                ex.jit_names.add(stmt.name)


def _dispatch_table(tree: ast.Module, kernels: set[str]) -> dict[tuple[str, str], set[str]]:
    """(host function, variable) -> the kernels a `kernel[grid](...)` launch through that variable may
    run: `kernel = _hopper_kernel` on one branch, `kernel = select_kernel(M, N, config)` on another,
    where the selector (any of its definitions) returns a kernel of this file."""
    returns: dict[str, set[str]] = {}
    functions = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]

    def named(value: ast.expr | None) -> set[str]:
        if isinstance(value, ast.Name) and value.id in kernels:
            return {value.id}
        if isinstance(value, ast.IfExp):
            return named(value.body) | named(value.orelse)
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Name):
            return returns.get(value.func.id, set())
        return set()

    for fn in functions:
        for n in ast.walk(fn):
            if isinstance(n, ast.Return):
                returns.setdefault(fn.name, set()).update(named(n.value) if not isinstance(n.value, ast.Call) else set())
    out: dict[tuple[str, str], set[str]] = {}
    for fn in functions:
        for n in ast.walk(fn):
            if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name):
                found = named(n.value)
                if found:
                    out.setdefault((fn.name, n.targets[0].id), set()).update(found)
    return out


def _inline_helpers(kernels: list[KernelFacts]) -> None:
    """Make a @triton.jit helper's facts visible at its call sites.

    Upstream kernels put `tl.dot` chains and reductions in helpers; a predicate
    over the caller must see them. Inlined calls keep their own lines and are
    tagged with the helper they came through (`via`).
    """
    by_name = {k.name: k for k in kernels}

    def expand(kernel: KernelFacts, seen: frozenset[str]) -> list[CallSite]:
        out = []
        for call in kernel.calls:
            out.append(call)
            callee = by_name.get(call.name)
            if callee is not None and callee.name not in seen:
                for inner in expand(callee, seen | {callee.name}):
                    if inner.via:
                        out.append(inner)
                    else:
                        out.append(inner.model_copy(update={"via": callee.name, "loops": call.loops + inner.loops}))
        return out

    def loops(kernel: KernelFacts, seen: frozenset[str]) -> list[LoopFacts]:
        """The helpers' loops, at the depth of the call that runs them: a kernel whose K or KV loop
        lives in a helper (`_attn_fwd_inner`) loops all the same."""
        out = []
        for call in kernel.calls:
            callee = by_name.get(call.name)
            if callee is None or callee.name in seen or call.via:
                continue
            for lp in [*callee.loops, *loops(callee, seen | {callee.name})]:
                out.append(lp.model_copy(update={"via": lp.via or callee.name, "depth": lp.depth + len(call.loops)}))
        return out

    expanded = {k.name: expand(k, frozenset({k.name})) for k in kernels}
    inlined = {k.name: loops(k, frozenset({k.name})) for k in kernels}
    for k in kernels:
        k.calls = expanded[k.name]
        own = {lp.line for lp in k.loops}
        for lp in inlined[k.name]:
            if lp.line not in own:
                own.add(lp.line)
                k.loops.append(lp)
        k.helpers = sorted({c.name for c in k.calls if c.name in by_name})


def parse(source: str, path: str = "<string>", tree: ast.Module | None = None) -> FileFacts:
    """Facts of one Python file; `tree` is `ast.parse(source)` when the caller has it already."""
    if tree is None:
        try:
            tree = ast.parse(source, filename=path)
        except SyntaxError as exc:
            raise FactsError(f"{path}:{exc.lineno or 0}: syntax error: {exc.msg}") from None
        except (ValueError, MemoryError) as exc:  # null bytes, absurd nesting
            raise FactsError(f"{path}: cannot parse: {exc}") from None
    ex = _Extractor(_Source(source), path)
    _module_jit(ex, tree)
    ex.visit(tree)
    _inline_helpers(ex.kernels)
    by_kernel = {k.name: k for k in ex.kernels}
    by_kernel.update({bound: by_kernel[fn] for fn, bound in ex.jit_wrapped.items() if fn in by_kernel})
    dispatched = None
    for launch in ex.launches:
        target = by_kernel.get(launch.kernel.rsplit(".", 1)[-1])
        if target is not None:
            target.launches.append(launch)
        elif "." not in launch.kernel:
            dispatched = dispatched if dispatched is not None else _dispatch_table(tree, set(by_kernel))
            for name in sorted(dispatched.get((launch.function, launch.kernel), ())):
                by_kernel[name].launches.append(launch)
    called = {h for k in ex.kernels for h in k.helpers}
    for k in ex.kernels:
        k.device_function = k.returns_value or (k.name in called and not k.launches)
    return FileFacts(
        path=path,
        kernels=ex.kernels,
        launches=ex.launches,
        host_calls=ex.host_calls,
        host_functions=sorted(ex.host_functions),
        imports=dict(ex.aliases),
        constants=ex.constants,
        module_calls=ex.module_calls,
        host_assigns=ex.host_assigns,
        host_defaults=ex.host_defaults,
        docstring=(ast.get_docstring(tree) or "").strip(),
        lines=source.count("\n") + 1,
    )
