"""The codemod base every rewrite subclasses, and the analysis and edits rewrites share.

A codemod (`PlannedCodemod`) plans on the original tree (in `plan`, called
from visit_Module) and records edits keyed by the original nodes; `on_leave`
applies them, so every site of a multi-site rewrite (decorators, kernel body,
launcher) is decided before anything is changed, and a refusal never leaves a
half-edit. A codemod may also edit in leave_* methods; they run before the
planned edits of the same node. rewriter/README.md says how a rewrite and its
cases are laid out.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

import jinja2
import libcst as cst
import libcst.matchers as m
from typing import Any, ClassVar

from libcst.codemod import CodemodContext, SkipFile, VisitorBasedCodemodCommand
from libcst.metadata import PositionProvider

from patterns.core.cst_facts import dotted  # noqa: F401 - re-exported to the codemods
from patterns.core.facts_types import FileFacts, KernelFacts

TEMPLATES = Path(__file__).resolve().parent / "templates"
WIDTH = 120  # longest line the rewrites write before breaking a signature or a call


# --------------------------------------------------------------------------------------
# text
# --------------------------------------------------------------------------------------


def code(node: cst.CSTNode) -> str:
    return cst.Module([]).code_for_node(node).strip()


def expr(text: str) -> cst.BaseExpression:
    return cst.parse_expression(text)


def stmts(text: str) -> list[cst.BaseStatement]:
    module = cst.parse_module(text)
    body = list(module.body)
    if body and module.header:
        body[0] = body[0].with_changes(leading_lines=[*module.header, *body[0].leading_lines])
    return body


def render(pattern: str, template: str, **values) -> str:
    """rewriter/templates/<pattern>/<template>, rendered."""
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES / pattern), undefined=jinja2.StrictUndefined,
                             trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)
    return env.get_template(template).render(**values)


def render_stmts(pattern: str, template: str, **values) -> list[cst.BaseStatement]:
    """A template rendered as statements; comments above the first one stay with it."""
    return stmts(render(pattern, template, **values))


def flat(node: cst.CSTNode | cst.FlattenSentinel) -> list:
    """The statements an edit produced: one node, or those of a FlattenSentinel."""
    return list(node.nodes) if isinstance(node, cst.FlattenSentinel) else [node]


def unparen(text: str) -> str:
    """`(H * K)` -> `H * K` when the outer parentheses enclose the whole expression."""
    node = expr(text)
    if node.lpar and len(node.lpar) == 1:
        return code(node.with_changes(lpar=[], rpar=[]))
    return text


def paren(text: str) -> str:
    """Parenthesise a host or kernel expression used as an operand of `*`."""
    node = expr(text)
    return text if isinstance(node, (cst.Name, cst.Integer, cst.Call, cst.Attribute, cst.Subscript)) or node.lpar else f"({text})"


def quote_of(module: cst.Module) -> str:
    """The quote the file writes short strings with (docstrings aside); double by default."""
    singles = doubles = 0
    for s in m.findall(module, m.SimpleString()):
        v = s.value.lstrip("rbfuRBFU")  # type: ignore[attr-defined]
        if v.startswith(('"""', "'''")):
            continue
        singles += v.startswith("'")
        doubles += v.startswith('"')
    return "'" if singles > doubles else '"'


def names_in(node: cst.CSTNode) -> set[str]:
    """Variable names an expression reads (attribute names and keywords excluded)."""
    out: set[str] = set()
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, cst.Name):
            out.add(n.value)
        elif isinstance(n, cst.Attribute):
            stack.append(n.value)
        elif isinstance(n, cst.Arg):
            stack.append(n.value)
        else:
            stack.extend(n.children)
    return out


def int_of(node: cst.CSTNode | None) -> int | None:
    if isinstance(node, cst.Integer):
        return int(node.value)
    return None


# --------------------------------------------------------------------------------------
# parameters and arguments
# --------------------------------------------------------------------------------------


def _indent_of(fn: cst.FunctionDef) -> str:
    ws = fn.whitespace_before_params
    if isinstance(ws, cst.ParenthesizedWhitespace):
        return ws.last_line.value
    return ""


def multiline(fn: cst.FunctionDef) -> bool:
    return isinstance(fn.whitespace_before_params, cst.ParenthesizedWhitespace)


def new_param(name: str, annotation: str | None = None) -> cst.Param:
    ann = cst.Annotation(expr(annotation), whitespace_before_indicator=cst.SimpleWhitespace("")) if annotation else None
    return cst.Param(cst.Name(name), annotation=ann)


def insert_params(fn: cst.FunctionDef, where: list[tuple[int, cst.Param]], def_indent: str = "") -> cst.FunctionDef:
    """Insert params at indices of the original positional list, keeping the signature's layout.

    Inserted after param i-1 on its line; at the end of a multi-line signature on a
    new line. A one-line signature longer than WIDTH afterwards is broken after `(`.
    """
    params = list(fn.params.params)
    n = len(params)
    out: list[cst.Param] = []
    by_index: dict[int, list[cst.Param]] = {}
    for i, p in where:
        by_index.setdefault(i, []).append(p)
    space = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    ml = multiline(fn)
    for i in range(n + 1):
        for p in by_index.get(i, []):
            if not out:
                out.append(p.with_changes(comma=space))
                continue
            prev = out[-1]
            if i == n and ml:
                # a new line of its own, indented like the others
                nl = cst.Comma(whitespace_after=cst.ParenthesizedWhitespace(
                    first_line=cst.TrailingWhitespace(), empty_lines=[], indent=True,
                    last_line=cst.SimpleWhitespace(_indent_of(fn))))
                out[-1] = prev.with_changes(comma=nl)
                out.append(p.with_changes(comma=prev.comma))
            else:
                out[-1] = prev.with_changes(comma=space)
                out.append(p.with_changes(comma=prev.comma))
        if i < n:
            out.append(params[i])
    new = fn.with_changes(params=fn.params.with_changes(params=out))
    if not ml:
        line = cst.Module([]).code_for_node(new.with_changes(body=cst.SimpleStatementSuite([cst.Pass()]), decorators=[], leading_lines=[]))
        header = def_indent + line.splitlines()[0]
        if len(header) > WIDTH:
            last = out[-1]
            out[-1] = last.with_changes(comma=cst.Comma(whitespace_after=cst.ParenthesizedWhitespace(
                first_line=cst.TrailingWhitespace(), empty_lines=[], indent=True, last_line=cst.SimpleWhitespace(def_indent))))
            new = new.with_changes(
                params=new.params.with_changes(params=out),
                whitespace_before_params=cst.ParenthesizedWhitespace(
                    first_line=cst.TrailingWhitespace(), empty_lines=[], indent=True, last_line=cst.SimpleWhitespace(def_indent + "    ")),
            )
    return new


def param_separator(fn: cst.FunctionDef, source: str, positions, added: str, width: int = WIDTH) -> cst.Comma:
    """The comma after the signature's last parameter before `added`: on the same line while it fits in
    `width` columns, else a line break indented like that line's first parameter."""
    params = list(fn.params.params)
    last = params[-1]
    line = positions(last).end.line
    text = source.splitlines()[line - 1]
    if len(text.rstrip()) + len(added) + 2 <= width:
        return cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    col = min(positions(p).start.column for p in params if positions(p).start.line == line)
    return cst.Comma(whitespace_after=cst.ParenthesizedWhitespace(
        first_line=cst.TrailingWhitespace(), empty_lines=[], indent=False, last_line=cst.SimpleWhitespace(" " * col)))


def kwarg(name: str, value: str | cst.BaseExpression) -> cst.Arg:
    return cst.Arg(value=expr(value) if isinstance(value, str) else value, keyword=cst.Name(name),
                   equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")))


def insert_args(call: cst.Call, where: list[tuple[int, cst.Arg]]) -> cst.Call:
    """Insert arguments at indices of the original argument list, each after its predecessor on its line."""
    args = list(call.args)
    n = len(args)
    by_index: dict[int, list[cst.Arg]] = {}
    for i, a in where:
        by_index.setdefault(i, []).append(a)
    space = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    out: list[cst.Arg] = []
    for i in range(n + 1):
        for a in by_index.get(i, []):
            if out:
                prev = out[-1]
                out[-1] = prev.with_changes(comma=space)
                out.append(a.with_changes(comma=prev.comma))
            else:
                out.append(a.with_changes(comma=space))
        if i < n:
            out.append(args[i])
    return call.with_changes(args=out)


def wrap_long_launch(stmt: cst.SimpleStatementLine, column: int) -> cst.SimpleStatementLine:
    """Break a one-line `kernel[grid](...)` statement wider than WIDTH after `(`, one indent in, with a trailing comma."""
    text = code(stmt)
    if "\n" in text or column + len(text) <= WIDTH:
        return stmt

    class Wrap(cst.CSTTransformer):
        done = False

        def leave_Call(self, o: cst.Call, u: cst.Call) -> cst.Call:
            if self.done or not isinstance(u.func, cst.Subscript) or not u.args:
                return u
            self.done = True
            nl = lambda extra: cst.ParenthesizedWhitespace(first_line=cst.TrailingWhitespace(), empty_lines=[], indent=True,  # noqa: E731
                                                           last_line=cst.SimpleWhitespace(extra))
            args = list(u.args)
            args[-1] = args[-1].with_changes(comma=cst.Comma(whitespace_after=nl("")))
            return u.with_changes(whitespace_before_args=nl("    "), args=args)

    return stmt.visit(Wrap())  # type: ignore[return-value]


# --------------------------------------------------------------------------------------
# reading a function body
# --------------------------------------------------------------------------------------


@dataclass
class Binding:
    stmt: cst.BaseSmallStatement
    line: cst.SimpleStatementLine | None
    value: cst.BaseExpression
    aug: bool = False


@dataclass
class Body:
    """Assignments of one function (every block), for reading expressions through their definitions."""

    fn: cst.FunctionDef
    bindings: dict[str, list[Binding]] = field(default_factory=dict)
    loops: list[cst.For] = field(default_factory=list)

    @classmethod
    def of(cls, fn: cst.FunctionDef) -> Body:
        b = cls(fn)
        b._walk(fn.body)
        return b

    def _walk(self, node: cst.CSTNode, line: cst.SimpleStatementLine | None = None) -> None:
        for child in node.children:
            if isinstance(child, cst.SimpleStatementLine):
                for small in child.body:
                    self._small(small, child)
            elif isinstance(child, cst.For):
                self.loops.append(child)
                for n in _target_names(child.target):
                    self.bindings.setdefault(n, []).append(Binding(child, None, child.iter))  # type: ignore[arg-type]
                self._walk(child)
            elif isinstance(child, (cst.FunctionDef, cst.ClassDef)):
                continue
            elif isinstance(child, cst.CSTNode):
                self._walk(child, line)

    def _small(self, small: cst.BaseSmallStatement, line: cst.SimpleStatementLine) -> None:
        if isinstance(small, cst.Assign):
            for t in small.targets:
                tgt, val = t.target, small.value
                if isinstance(tgt, cst.Tuple) and isinstance(val, cst.Tuple) and len(tgt.elements) == len(val.elements):
                    for el, v in zip(tgt.elements, val.elements):
                        for n in _target_names(el.value):
                            self.bindings.setdefault(n, []).append(Binding(small, line, v.value))
                else:
                    for n in _target_names(tgt):
                        self.bindings.setdefault(n, []).append(Binding(small, line, val))
        elif isinstance(small, (cst.AugAssign, cst.AnnAssign)) and small.value is not None:
            for n in _target_names(small.target):
                self.bindings.setdefault(n, []).append(Binding(small, line, small.value, aug=isinstance(small, cst.AugAssign)))

    def single(self, name: str) -> cst.BaseExpression | None:
        """The value of a name assigned exactly once by a plain assignment (not a loop target)."""
        bs = self.bindings.get(name, [])
        if len(bs) == 1 and not bs[0].aug and not isinstance(bs[0].stmt, cst.For):
            return bs[0].value
        return None

    def expand(self, node: cst.BaseExpression, depth: int = 8, also: dict[str, cst.BaseExpression] | None = None) -> cst.BaseExpression:
        """The expression with singly-assigned names replaced by their values (for reading, not writing);
        `also` gives values for other names (a pointer's first value before the loop advances it)."""
        if depth == 0:
            return node
        body = self

        class Sub(cst.CSTTransformer):
            def visit_Attribute(self, n: cst.Attribute) -> bool:
                return True

            def leave_Attribute(self, o: cst.Attribute, u: cst.Attribute) -> cst.Attribute:
                return u.with_changes(attr=o.attr)

            def visit_Arg(self, n: cst.Arg) -> bool:
                return True

            def leave_Arg(self, o: cst.Arg, u: cst.Arg) -> cst.Arg:
                return u.with_changes(keyword=o.keyword)

            def leave_Name(self, o: cst.Name, u: cst.Name) -> cst.BaseExpression:
                v = body.single(o.value)
                if v is None and also:
                    v = also.get(o.value)
                if v is None:
                    return u
                inner = body.expand(v, depth - 1, also)
                return inner.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()]) if not inner.lpar else inner

        return node.visit(Sub())  # type: ignore[return-value]

    def aranges(self, node: cst.BaseExpression) -> set[str]:
        """Blocks B of every `tl.arange(0, B)` an expression is built from."""
        out = set()
        for c in m.findall(self.expand(node), m.Call(func=m.Attribute(value=m.Name("tl"), attr=m.Name("arange")))):
            if len(c.args) == 2 and isinstance(c.args[1].value, cst.Name):  # type: ignore[attr-defined]
                out.add(c.args[1].value.value)  # type: ignore[attr-defined]
        return out

    def depends(self, node: cst.CSTNode, on: set[str]) -> bool:
        """Whether an expression reads one of `on`, directly or through assignments."""
        seen: set[str] = set()
        stack = list(names_in(node))
        while stack:
            n = stack.pop()
            if n in on:
                return True
            if n in seen:
                continue
            seen.add(n)
            for b in self.bindings.get(n, []):
                stack.extend(names_in(b.value))
        return False

    def bases(self, node: cst.BaseExpression, params: set[str]) -> set[str]:
        """Pointer parameters an address expression is based on: `q + o[:, None] * K` -> {q}."""
        out: set[str] = set()
        seen: set[str] = set()

        def walk(n: cst.BaseExpression) -> None:
            if isinstance(n, cst.BinaryOperation) and isinstance(n.operator, (cst.Add, cst.Subtract)):
                walk(n.left)
                if isinstance(n.operator, cst.Add):
                    walk(n.right)
            elif isinstance(n, cst.Subscript):
                walk(n.value)
            elif isinstance(n, cst.Name):
                if n.value in params:
                    out.add(n.value)
                if n.value in seen:
                    return
                seen.add(n.value)
                for b in self.bindings.get(n.value, []):
                    if not isinstance(b.stmt, cst.For):
                        walk(b.value)
            elif isinstance(n, cst.Call) and dotted(n.func) in ("tl.make_block_ptr", "tl.advance", "tl.multiple_of", "tl.max_contiguous") and n.args:
                walk(n.args[0].value)

        walk(node)
        return out

    def calls(self, *names: str) -> Iterator[cst.Call]:
        for c in m.findall(self.fn.body, m.Call()):
            if dotted(c.func) in names:  # type: ignore[attr-defined]
                yield c  # type: ignore[misc]

def _target_names(t: cst.BaseExpression) -> list[str]:
    if isinstance(t, cst.Name):
        return [t.value]
    if isinstance(t, (cst.Tuple, cst.List)):
        return [n for el in t.elements for n in _target_names(el.value)]
    return []


def block_dims(body: Body, blocks: set[str]) -> dict[str, set[str]]:
    """dimension name -> blocks whose tl.arange offsets are compared against it (`o_m < M` -> M: {BM})."""
    out: dict[str, set[str]] = {}
    for comp in m.findall(body.fn.body, m.Comparison()):
        for i, ct in enumerate(comp.comparisons):  # type: ignore[attr-defined]
            if not isinstance(ct.operator, (cst.LessThan, cst.LessThanEqual)):
                continue
            left = comp.left if i == 0 else comp.comparisons[i - 1].comparator  # type: ignore[attr-defined]
            dim = ct.comparator
            if isinstance(dim, cst.Name):
                found = body.aranges(left) & blocks
                if found:
                    out.setdefault(dim.value, set()).update(found)
    return out


def pid_axes(body: Body) -> dict[int, list[cst.Call]]:
    out: dict[int, list[cst.Call]] = {}
    for c in body.calls("tl.program_id"):
        a = c.args[0].value if c.args else None
        axis = int_of(a)
        out.setdefault(-1 if axis is None else axis, []).append(c)
    return out


# --------------------------------------------------------------------------------------
# host side
# --------------------------------------------------------------------------------------


def host_assigns(host: cst.FunctionDef) -> dict[str, list[tuple[cst.SimpleStatementLine, cst.BaseExpression]]]:
    """name -> [(statement, value)] in the launcher body, pairwise for tuple assignments."""
    out: dict[str, list] = {}
    for line in m.findall(host.body, m.SimpleStatementLine()):
        for small in line.body:  # type: ignore[attr-defined]
            if isinstance(small, cst.Assign):
                for t in small.targets:
                    tgt, val = t.target, small.value
                    if isinstance(tgt, cst.Tuple):
                        same = isinstance(val, cst.Tuple) and len(val.elements) == len(tgt.elements)
                        for i, el in enumerate(tgt.elements):
                            if isinstance(el.value, cst.Name):
                                out.setdefault(el.value.value, []).append((line, val.elements[i].value if same else val))  # type: ignore[union-attr]
                    elif isinstance(tgt, cst.Name):
                        out.setdefault(tgt.value, []).append((line, val))
            elif isinstance(small, (cst.AugAssign, cst.AnnAssign)) and isinstance(small.target, cst.Name) and small.value is not None:
                out.setdefault(small.target.value, []).append((line, small.value))
    return out


def launcher_assigns(host: cst.FunctionDef) -> dict[str, list[tuple[cst.CSTNode, cst.BaseExpression]]]:
    """name -> [(top-level statement of the launcher, the expression assigned to it)], pairwise for tuples."""
    out: dict[str, list[tuple[cst.CSTNode, cst.BaseExpression]]] = {}
    for stmt in host.body.body:
        for assign in m.findall(stmt, m.Assign() | m.AugAssign()):
            targets = [t.target for t in assign.targets] if isinstance(assign, cst.Assign) else [assign.target]  # type: ignore[attr-defined]
            val = assign.value  # type: ignore[attr-defined]
            for tgt in targets:
                if isinstance(tgt, cst.Name):
                    out.setdefault(tgt.value, []).append((stmt, val))
                elif isinstance(tgt, cst.Tuple):
                    same = isinstance(val, cst.Tuple) and len(val.elements) == len(tgt.elements) and not any(
                        isinstance(e, cst.StarredElement) for e in val.elements)
                    for i, el in enumerate(tgt.elements):
                        if isinstance(el.value, cst.Name):
                            out.setdefault(el.value.value, []).append((stmt, val.elements[i].value if same else val))  # type: ignore[union-attr]
    return out


def pointer_bases(node: cst.BaseExpression, pointers: set[str], assigns: dict, calls: bool = True,
                  seen: frozenset[str] = frozenset()) -> set[str]:
    """Pointer parameters an address is based on: the terms of its sums (not of its products), through the
    kernel's assignments (facts `assigns`: name -> (line, text)); with `calls`, also the pointer arguments of
    calls (`tl.make_block_ptr(base=...)`). Unreadable text counts as every pointer."""
    def walk(n: cst.BaseExpression, seen: frozenset[str]) -> set[str]:
        if isinstance(n, cst.Name):
            if n.value in pointers:
                return {n.value}
            if n.value not in assigns or n.value in seen:
                return set()
            try:
                return walk(cst.parse_expression(assigns[n.value][1]), seen | {n.value})
            except cst.ParserSyntaxError:
                return set(pointers)
        if isinstance(n, cst.BinaryOperation) and isinstance(n.operator, (cst.Add, cst.Subtract)):
            return walk(n.left, seen) | walk(n.right, seen)
        if isinstance(n, (cst.Subscript, cst.Attribute)):
            return walk(n.value, seen)
        if calls and isinstance(n, cst.Call):
            return set().union(*(walk(a.value, seen) for a in n.args if a.keyword is None or a.keyword.value in ("base", "pointer")))
        return set()

    return walk(node, seen)


SHAPE_CALLS = re.compile(r"\.shape\b|\.size\(|\.numel\(|\blen\(")


@dataclass
class Launch:
    """One `kernel[grid](...)` call and what it passes to each kernel parameter."""

    host: cst.FunctionDef
    stmt: cst.SimpleStatementLine
    call: cst.Call
    grid: cst.BaseExpression
    by_param: dict[str, cst.Arg]
    options: dict[str, cst.Arg]  # num_warps, num_stages, ... (launch keywords that are not parameters)
    assigns: dict[str, list]

    def value(self, param: str) -> cst.BaseExpression | None:
        a = self.by_param.get(param)
        return a.value if a is not None else None

    def literal(self, node: cst.BaseExpression | None) -> int | None:
        """An int literal, directly or through a launcher name assigned once to one."""
        for _ in range(4):
            if node is None:
                return None
            if isinstance(node, cst.Integer):
                return int(node.value)
            if isinstance(node, cst.Name) and len(self.assigns.get(node.value, [])) == 1:
                node = self.assigns[node.value][0][1]
                continue
            return None
        return None

    def shape_derived(self, node: cst.BaseExpression, depth: int = 4) -> bool:
        """An int derived from tensor shapes (`a.shape[0]`, `M` with `M, K = a.shape`, `B * H`)."""
        text = code(node)
        if SHAPE_CALLS.search(text):
            return not m.findall(node, m.Float() | m.Power())
        if depth == 0 or m.findall(node, m.Float() | m.Power() | m.Call() | m.SimpleString()):
            return False
        names = names_in(node)
        if not names:
            return False
        for n in names:
            found = self.assigns.get(n, [])
            if len(found) != 1 or not self.shape_derived(found[0][1], depth - 1):
                return False
        return True


def find_launch(codemod: PlannedCodemod, module: cst.Module, line: int, params: list[str]) -> Launch:
    """The launch on `line` of a top-level launcher, with its arguments mapped onto kernel parameters."""
    for host in module.body:
        if not isinstance(host, cst.FunctionDef):
            continue
        for call in m.findall(host.body, m.Call(func=m.Subscript())):
            if codemod.get_metadata(PositionProvider, call).start.line != line:
                continue
            stmt = None
            for s in m.findall(host.body, m.SimpleStatementLine()):
                if any(c is call for c in m.findall(s, m.Call(func=m.Subscript()))):
                    stmt = s
            if stmt is None:
                codemod.refuse(f"the launch on line {line} is not a statement of its own")
            sl = call.func.slice  # type: ignore[attr-defined]
            if len(sl) != 1 or not isinstance(sl[0].slice, cst.Index):
                codemod.refuse(f"the launch on line {line} has no grid")
            by_param, options = {}, {}
            positional = [a for a in call.args if a.keyword is None]  # type: ignore[attr-defined]
            if any(a.star for a in call.args):  # type: ignore[attr-defined]
                codemod.refuse(f"the launch on line {line} passes *args/**kwargs: its arguments cannot be matched to parameters")
            for p, a in zip(params, positional):
                by_param[p] = a
            for a in call.args:  # type: ignore[attr-defined]
                if a.keyword is not None:
                    (by_param if a.keyword.value in params else options)[a.keyword.value] = a
            return Launch(host, stmt, call, sl[0].slice.value, by_param, options, host_assigns(host))  # type: ignore[arg-type]
    codemod.refuse(f"the launch on line {line} is not in a top-level function")
    raise AssertionError  # unreachable


def only_launch(codemod: PlannedCodemod, module: cst.Module) -> tuple[Launch, cst.BaseExpression, cst.SimpleStatementLine | None]:
    """The target kernel's one launch in the file, its grid (read through a name assigned once) and the
    statement assigning that name (None for an inline grid)."""
    k = codemod.kernel
    if len(k.launches) != 1:
        codemod.refuse(f"{k.name} is launched {len(k.launches)}× in this file: one launch must change with the kernel")
    la = find_launch(codemod, module, k.launches[0].line, [p.name for p in k.params])
    grid, grid_stmt = la.grid, None
    if isinstance(grid, cst.Name):
        found = la.assigns.get(grid.value, [])
        if len(found) != 1:
            codemod.refuse(f"the grid `{grid.value}` is assigned {len(found)}× in {la.host.name.value}")
        grid_stmt, grid = found[0]
    return la, grid, grid_stmt


# --------------------------------------------------------------------------------------
# the planned-edit codemod
# --------------------------------------------------------------------------------------


@dataclass
class _Edit:
    transforms: list[Callable[[cst.CSTNode], cst.CSTNode]] = field(default_factory=list)
    before: list[cst.BaseStatement] = field(default_factory=list)
    after: list[cst.BaseStatement] = field(default_factory=list)
    removed: bool = False


class PlannedCodemod(VisitorBasedCodemodCommand):
    """The base of every rewrite: plan every edit on the original tree first (`plan`), then apply them.

    Subclasses set PATTERN (the pattern id, equal to the file name) and
    DESCRIPTION, and define `plan(module)`. There `self.facts` holds the file's
    facts, `self.kernel` the targeted kernel's, `self.fn` its FunctionDef,
    `self.body` its assignments (Body) and `self.params` the validated
    parameters. Refuse with `self.refuse("reason")`: nothing is changed then.
    A rewrite of host code only (no kernel) sets SCOPE = "file".
    """

    PATTERN: ClassVar[str] = ""
    DESCRIPTION: ClassVar[str] = ""
    SCOPE: ClassVar[str] = "kernel"  # "kernel": refuses a file without a top-level target kernel; "file": host code
    METADATA_DEPENDENCIES = (PositionProvider,)

    def __init__(self, context: CodemodContext, facts: FileFacts, kernel: KernelFacts | None, params: dict[str, Any]):
        super().__init__(context)
        self.facts = facts
        self.kernel = kernel
        self.params = params

    def refuse(self, reason: str) -> None:
        raise SkipFile(reason)

    def in_target(self, node: cst.FunctionDef) -> bool:
        return self.kernel is not None and node.name.value == self.kernel.name

    def target_launchers(self) -> set[str]:
        return {la.function for la in (self.kernel.launches if self.kernel else [])}

    def line(self, node: cst.CSTNode) -> int:
        return self.get_metadata(PositionProvider, node).start.line

    def end_line(self, node: cst.CSTNode) -> int:
        return self.get_metadata(PositionProvider, node).end.line

    def launch_in(self, host: cst.FunctionDef, line: int) -> tuple[cst.Call, int]:
        """The launch call on `line` of `host`, and the index of the top-level statement of host that holds it."""
        call = next((c for c in m.findall(host, m.Call(func=m.Subscript())) if self.line(c) == line), None)
        if call is None:  # pragma: no cover - facts and tree agree on lines
            self.refuse(f"cannot find the launch on line {line}")
        return call, next(i for i, s in enumerate(host.body.body) if self.line(s) <= line <= self.end_line(s))  # type: ignore[return-value]

    def visit_Module(self, node: cst.Module) -> None:
        self.quote = quote_of(node)
        self._edits: dict[int, _Edit] = {}
        self._carry: list[cst.EmptyLine] = []
        self._carried: dict[int, list[cst.EmptyLine]] = {}
        if self.SCOPE == "kernel":
            if self.kernel is None:
                self.refuse("the file has no Triton kernel")
            fn = next((s for s in node.body if isinstance(s, cst.FunctionDef) and s.name.value == self.kernel.name), None)
            if fn is None:
                self.refuse(f"{self.kernel.name} is not a top-level function of the file")
            self.fn = fn
            self.body = Body.of(fn)
        self.plan(node)

    def plan(self, module: cst.Module) -> None:  # pragma: no cover - every rewrite defines it
        raise NotImplementedError

    def q(self, s: str) -> str:
        return f"{self.quote}{s}{self.quote}"

    def _edit(self, node: cst.CSTNode) -> _Edit:
        return self._edits.setdefault(id(node), _Edit())

    def replace(self, node: cst.CSTNode, new: cst.CSTNode | Callable[[cst.CSTNode], cst.CSTNode]) -> None:
        self._edit(node).transforms.append(new if callable(new) else (lambda u, n=new: n))

    def insert_before(self, stmt: cst.CSTNode, new: list[cst.BaseStatement]) -> None:
        self._edit(stmt).before.extend(new)

    def insert_after(self, stmt: cst.CSTNode, new: list[cst.BaseStatement]) -> None:
        self._edit(stmt).after.extend(new)

    def keep_width(self, stmt: cst.SimpleStatementLine) -> None:
        """Break the launch in `stmt` after `(` if the edits made it wider than WIDTH."""
        column = self.get_metadata(PositionProvider, stmt).start.column
        self.replace(stmt, lambda u: wrap_long_launch(u, column))

    def remove(self, stmt: cst.CSTNode) -> None:
        self._edit(stmt).removed = True

    def on_leave(self, original: cst.CSTNode, updated: cst.CSTNode):  # type: ignore[override]
        updated = super().on_leave(original, updated)  # type: ignore[assignment]
        updated = self._with_carried(original, updated)
        e = self._edits.get(id(original))
        if e is None:
            return updated
        for t in e.transforms:
            updated = t(updated)
        if not (e.before or e.after or e.removed):
            return updated
        before = list(e.before)
        lead = list(updated.leading_lines) if isinstance(updated, (cst.SimpleStatementLine, cst.BaseCompoundStatement)) else []
        if before and lead:
            # a blank line (and what precedes it) stays above the inserted lines; the comment
            # lines right above the statement stay with it
            cut = max((i + 1 for i, ln in enumerate(lead) if ln.comment is None), default=0)
            before[0] = before[0].with_changes(leading_lines=[*lead[:cut], *before[0].leading_lines])
            updated = updated.with_changes(leading_lines=lead[cut:])  # type: ignore[union-attr]
            lead = lead[cut:]
        if e.removed and lead:
            # the lines above a removed statement go to whatever comes next
            if e.after:
                e.after[0] = e.after[0].with_changes(leading_lines=[*lead, *e.after[0].leading_lines])
            else:
                self._carry.extend(lead)
        items = [*before, *([] if e.removed else [updated]), *e.after]
        if not items:
            return cst.RemoveFromParent()
        return cst.FlattenSentinel(items)

    def on_visit(self, node: cst.CSTNode) -> bool:
        if getattr(self, "_carry", None) and isinstance(node, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
            self._carried[id(node)] = self._carry
            self._carry = []
        return super().on_visit(node)

    def _with_carried(self, original: cst.CSTNode, updated):
        lines = getattr(self, "_carried", {}).pop(id(original), None)
        if not lines or not isinstance(updated, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
            return updated
        merged: list[cst.EmptyLine] = []
        for ln in [*lines, *updated.leading_lines]:
            if ln.comment is None and merged and merged[-1].comment is None:
                continue  # one blank line where two sections met
            merged.append(ln)
        return updated.with_changes(leading_lines=merged)


# --------------------------------------------------------------------------------------
# 2-D tiles: `base + r[:, None] * stride + c[None, :]` and `m_r[:, None] & m_c[None, :]`
# --------------------------------------------------------------------------------------


def _axis(node: cst.BaseExpression) -> tuple[int, cst.BaseExpression] | None:
    """(0, r) for `r[:, None]`, (1, c) for `c[None, :]`."""
    if not isinstance(node, cst.Subscript) or len(node.slice) != 2:
        return None
    a, b = (e.slice for e in node.slice)
    is_all = lambda s: isinstance(s, cst.Slice) and s.lower is None and s.upper is None and s.step is None  # noqa: E731
    is_none = lambda s: isinstance(s, cst.Index) and m.matches(s.value, m.Name("None"))  # noqa: E731
    if is_all(a) and is_none(b):
        return 0, node.value
    if is_none(a) and is_all(b):
        return 1, node.value
    return None


def _terms(node: cst.BaseExpression) -> list[cst.BaseExpression] | None:
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Add) and not node.lpar:
        left, right = _terms(node.left), _terms(node.right)
        return None if left is None or right is None else left + right
    return [node]


@dataclass
class TileAxis:
    offset: cst.BaseExpression  # r of r[:, None]
    stride: str  # "1" when unscaled


@dataclass
class TilePointer:
    base: cst.BaseExpression
    axes: dict[int, TileAxis]


def tile_pointer(body: Body, ptr: cst.BaseExpression) -> TilePointer | None:
    """`base + r[:, None] * s_r + c[None, :] * s_c` (any order, through a singly-assigned name)."""
    if isinstance(ptr, cst.Name) and body.single(ptr.value) is not None:
        ptr = body.single(ptr.value)  # type: ignore[assignment]
    terms = _terms(ptr)
    if not terms:
        return None
    base, axes = None, {}
    for t in terms:
        ax, stride = _axis(t), "1"
        if ax is None and isinstance(t, cst.BinaryOperation) and isinstance(t.operator, cst.Multiply):
            for x, s in ((t.left, t.right), (t.right, t.left)):
                if _axis(x) is not None and _axis(s) is None:
                    ax, stride = _axis(x), code(s)
                    break
        if ax is None:
            if base is not None:
                return None
            base = t
            continue
        if ax[0] in axes:
            return None
        axes[ax[0]] = TileAxis(ax[1], unparen(stride))
    if base is None or set(axes) != {0, 1}:
        return None
    return TilePointer(base, axes)


def tile_mask(body: Body, mask: cst.BaseExpression | None) -> dict[int, tuple[cst.BaseExpression, cst.BaseExpression]] | None:
    """axis -> (offset, extent) for `(r < R)[:, None] & (c < C)[None, :]`-like masks; None if not of that form."""
    if mask is None:
        return {}
    if isinstance(mask, cst.Name) and body.single(mask.value) is not None:
        mask = body.single(mask.value)  # type: ignore[assignment]
    parts = []

    def split(n: cst.BaseExpression) -> None:
        if isinstance(n, cst.BinaryOperation) and isinstance(n.operator, cst.BitAnd):
            split(n.left)
            split(n.right)
        else:
            parts.append(n)

    split(mask)
    out: dict[int, tuple[cst.BaseExpression, cst.BaseExpression]] = {}
    for p in parts:
        p = p.with_changes(lpar=[], rpar=[])
        found = None
        ax = _axis(p)
        if ax is not None:  # m_r[:, None] with m_r = r < R, or (r < R)[:, None]
            inner = ax[1]
            if isinstance(inner, cst.Name) and body.single(inner.value) is not None:
                inner = body.single(inner.value)  # type: ignore[assignment]
            inner = inner.with_changes(lpar=[], rpar=[])
            if isinstance(inner, cst.Comparison) and len(inner.comparisons) == 1 and isinstance(inner.comparisons[0].operator, cst.LessThan):
                found = (ax[0], inner.left, inner.comparisons[0].comparator)
        elif isinstance(p, cst.Comparison) and len(p.comparisons) == 1 and isinstance(p.comparisons[0].operator, cst.LessThan):
            ax = _axis(p.left.with_changes(lpar=[], rpar=[]))  # r[:, None] < R
            if ax is not None:
                found = (ax[0], ax[1], p.comparisons[0].comparator)
        if found is None or found[0] in out:
            return None
        out[found[0]] = (found[1], found[2])
    return out


def same(a: cst.BaseExpression, b: cst.BaseExpression) -> bool:
    return unparen(code(a)) == unparen(code(b))


def pid_call(expr: cst.BaseExpression) -> tuple[int, bool] | None:
    """(axis, cast to int64) for `tl.program_id(a)` or `tl.program_id(a).to(tl.int64)`."""
    cast = m.matches(expr, m.Call(func=m.Attribute(attr=m.Name("to"))))
    if cast:
        expr = expr.func.value  # type: ignore[union-attr]
    if m.matches(expr, m.Call(func=m.Attribute(value=m.Name("tl"), attr=m.Name("program_id")), args=[m.Arg(m.Integer())])):
        return int(expr.args[0].value.value), cast  # type: ignore[union-attr]
    return None


def factor(node: cst.BaseExpression) -> str:
    """A grid element as a factor of a product."""
    atomic = isinstance(node, (cst.Name, cst.Attribute, cst.Call, cst.Subscript, cst.Integer))
    product = isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Multiply)
    return code(node) if atomic or product else f"({code(node)})"


def fold_pid(stmt: cst.SimpleStatementLine, axis: int, count: str, name: str) -> cst.SimpleStatementLine:
    """`i_nh = pid(AXIS)` -> `i_nh, NAME = pid(AXIS) // COUNT, pid(AXIS) % COUNT`: a new index of COUNT values
    folded into an existing program axis as its fastest-varying part (a tuple assignment gains one element)."""
    assign = stmt.body[0]
    tgt, val = assign.targets[0].target, assign.value  # type: ignore[attr-defined]
    pairs = list(zip(tgt.elements, val.elements)) if isinstance(tgt, cst.Tuple) and isinstance(val, cst.Tuple) else [(cst.Element(tgt), cst.Element(val))]
    space = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    targets, values = [], []
    for t, v in pairs:
        if (pid_call(v.value) or (-1,))[0] == axis:
            pid = code(v.value)
            v = v.with_changes(value=cst.parse_expression(f"{pid} // {count}"))
            folded = cst.parse_expression(f"{pid} % {count}")
        targets.append(t.with_changes(comma=space))
        values.append(v.with_changes(comma=space))
    targets.append(cst.Element(cst.Name(name)))
    values.append(cst.Element(folded))
    return stmt.with_changes(body=[assign.with_changes(targets=[assign.targets[0].with_changes(target=cst.Tuple(targets, lpar=[], rpar=[]))],
                                                       value=cst.Tuple(values, lpar=[], rpar=[]))])  # type: ignore[attr-defined]


def append_pid(stmt: cst.SimpleStatementLine, axis: int, cast: bool, name: str) -> cst.SimpleStatementLine:
    """`i_nh = pid(0)` -> `i_nh, NAME = pid(0), pid(AXIS)` (a tuple assignment gains one element)."""
    assign = stmt.body[0]
    tgt, val = assign.targets[0].target, assign.value  # type: ignore[attr-defined]
    new = cst.parse_expression(f"tl.program_id({axis}).to(tl.int64)" if cast else f"tl.program_id({axis})")
    space = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    if isinstance(tgt, cst.Tuple) and isinstance(val, cst.Tuple):
        tgt = tgt.with_changes(elements=[*[el.with_changes(comma=space) for el in tgt.elements], cst.Element(cst.Name(name))])
        val = val.with_changes(elements=[*[el.with_changes(comma=space) for el in val.elements], cst.Element(new)])
    else:
        tgt = cst.Tuple([cst.Element(tgt, comma=space), cst.Element(cst.Name(name))], lpar=[], rpar=[])
        val = cst.Tuple([cst.Element(val, comma=space), cst.Element(new)], lpar=[], rpar=[])
    return stmt.with_changes(body=[assign.with_changes(targets=[assign.targets[0].with_changes(target=tgt)], value=val)])  # type: ignore[attr-defined]


# --------------------------------------------------------------------------------------
# launch options (maxnreg, num_ctas, ...): one keyword on every launch of the kernel
# --------------------------------------------------------------------------------------


def set_launch_option(codemod: PlannedCodemod, module: cst.Module, name: str, value: str) -> None:
    """Pass `name=value` at every launch of the target kernel (replacing a value already there).

    Refuses an autotuned kernel: a compile option belongs in each of its triton.Config."""
    k = codemod.kernel
    if k.autotune is not None:
        codemod.refuse(f"{k.name} is autotuned: set {name} in each triton.Config")
    if not k.launches:
        codemod.refuse(f"no launch of {k.name} in this file to pass {name}")
    params = [p.name for p in k.params]
    for launch in k.launches:
        la = find_launch(codemod, module, launch.line, params)
        old = la.options.get(name)
        if old is not None:
            codemod.replace(old, lambda u: u.with_changes(value=expr(value)))
        else:
            codemod.replace(la.call, lambda u: insert_args(u, [(len(u.args), kwarg(name, value))]))
            codemod.keep_width(la.stmt)
