"""The libcst extractor behind patterns.facts (imported only when a file must be parsed).

libcst and its position metadata cost about half a second to import; with the
facts cache, `patterns suggest` on an unchanged file never loads them.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from patterns.facts import _FLOAT_DTYPES, _JIT_DECORATORS, _MODULE_ALIASES, FactsError
from patterns.types import (
    AutotuneFacts,
    CallSite,
    FileFacts,
    KernelFacts,
    LaunchFacts,
    LoopFacts,
    Param,
)


def dotted(node: cst.BaseExpression | None) -> str:
    """`a.b.c` for Name/Attribute chains, '' for anything else."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        base = dotted(node.value)
        return f"{base}.{node.attr.value}" if base else ""
    return ""


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
    accumulates: dict[str, list[str]] = field(default_factory=dict)
    # variable -> every variable its value derives from, transitively
    var_deps: dict[str, set[str]] = field(default_factory=dict)
    # variables whose value derives from a load from memory
    loaded: set[str] = field(default_factory=set)


class _Extractor(cst.CSTVisitor):
    METADATA_DEPENDENCIES = (PositionProvider,)

    def __init__(self, module: cst.Module, path: str):
        super().__init__()
        self.module = module
        self.path = path
        self.aliases: dict[str, str] = {}
        self.kernels: list[KernelFacts] = []
        self.launches: list[LaunchFacts] = []
        self.host_calls: list[CallSite] = []
        self.host_functions: dict[str, tuple[int, int]] = {}
        self.constants: dict[str, str] = {}
        self.module_calls: list[CallSite] = []
        self.host_assigns: dict[str, dict[str, tuple[int, str]]] = {}
        self._scopes: list[_Scope] = []
        self._kernel_stack: list[KernelFacts | None] = []

    # -- helpers ---------------------------------------------------------------
    def code(self, node: cst.CSTNode) -> str:
        return self.module.code_for_node(node).strip()

    def line(self, node: cst.CSTNode) -> int:
        return self.get_metadata(PositionProvider, node).start.line

    def end_line(self, node: cst.CSTNode) -> int:
        return self.get_metadata(PositionProvider, node).end.line

    def _qualify(self, name: str) -> str:
        """Normalise a dotted name through the file's import aliases."""
        if not name:
            return name
        head, _, rest = name.partition(".")
        full = self.aliases.get(head)
        if full is None:
            return name
        full = _MODULE_ALIASES.get(full, full)
        return f"{full}.{rest}" if rest else full

    @property
    def in_kernel(self) -> bool:
        return bool(self._kernel_stack) and self._kernel_stack[-1] is not None

    # -- imports ---------------------------------------------------------------
    def visit_Import(self, node: cst.Import) -> None:
        for alias in node.names:
            full = dotted(alias.name)
            local = alias.asname.name.value if alias.asname else full.split(".")[0]
            self.aliases[local] = full if alias.asname else full.split(".")[0]

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if isinstance(node.names, cst.ImportStar) or node.module is None:
            return
        module = dotted(node.module)
        for alias in node.names:
            name = dotted(alias.name)
            local = alias.asname.name.value if alias.asname else name
            self.aliases[local] = f"{module}.{name}"

    # -- functions -------------------------------------------------------------
    def _decorator_names(self, node: cst.FunctionDef) -> list[tuple[str, cst.Decorator]]:
        out = []
        for dec in node.decorators:
            expr = dec.decorator.func if isinstance(dec.decorator, cst.Call) else dec.decorator
            out.append((self._qualify(dotted(expr)), dec))
        return out

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        decorators = self._decorator_names(node)
        names = [n for n, _ in decorators]
        is_kernel = any(n in _JIT_DECORATORS or n.endswith(".jit") for n in names)
        if is_kernel:
            facts = KernelFacts(
                name=node.name.value,
                path=self.path,
                line=self.line(node),
                end_line=self.end_line(node),
                decorators=names,
                params=self._params(node),
                docstring=(node.get_docstring() or "").strip(),
            )
            for name, dec in decorators:
                self._decorator_facts(facts, name, dec)
            self.kernels.append(facts)
            self._kernel_stack.append(facts)
        else:
            self._kernel_stack.append(None)
            self.host_functions[node.name.value] = (self.line(node), self.end_line(node))
        self._scopes.append(_Scope(node.name.value))
        return True

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        scope = self._scopes.pop()
        kernel = self._kernel_stack.pop()
        if kernel is not None:
            kernel.calls = scope.calls
            kernel.loops = scope.loops
            kernel.dtypes = dict(scope.dtypes)
            kernel.origins = dict(scope.origins)
            kernel.pid_deps = {k: sorted(v) for k, v in scope.pid_deps.items() if v}
            kernel.assigns = dict(scope.assigns)
            kernel.accumulates = dict(scope.accumulates)
            kernel.loaded = sorted(scope.loaded)
        else:
            self.host_calls.extend(scope.calls)
            self.host_assigns[scope.name] = dict(scope.assigns)

    def _params(self, node: cst.FunctionDef) -> list[Param]:
        params = []
        for p in [*node.params.posonly_params, *node.params.params, *node.params.kwonly_params]:
            ann = self.code(p.annotation.annotation) if p.annotation else ""
            params.append(
                Param(
                    name=p.name.value,
                    constexpr=ann.endswith("constexpr"),
                    annotation=ann,
                    default=self.code(p.default) if p.default else None,
                )
            )
        return params

    def _decorator_facts(self, facts: KernelFacts, name: str, dec: cst.Decorator) -> None:
        call = dec.decorator if isinstance(dec.decorator, cst.Call) else None
        if call is None:
            return
        kwargs = {a.keyword.value: a.value for a in call.args if a.keyword}
        if name.endswith("autotune"):
            configs_node = kwargs.get("configs") or (call.args[0].value if call.args and not call.args[0].keyword else None)
            configs = []
            if isinstance(configs_node, (cst.List, cst.Tuple)):
                for el in configs_node.elements:
                    configs.append(self._config(el.value))
            elif configs_node is not None:  # list comprehension or a name: count unknown
                configs.append({"source": self.code(configs_node)})
            key_node = kwargs.get("key")
            keys = []
            if isinstance(key_node, (cst.List, cst.Tuple)):
                keys = [
                    el.value.evaluated_value if isinstance(el.value, cst.SimpleString) else self.code(el.value)
                    for el in key_node.elements
                ]
            facts.autotune = AutotuneFacts(
                line=self.line(dec), configs=configs, key=keys, generated=not isinstance(configs_node, (cst.List, cst.Tuple))
            )
        elif name.endswith("heuristics"):
            arg = call.args[0].value if call.args else None
            if isinstance(arg, cst.Dict):
                for el in arg.elements:
                    if isinstance(el, cst.DictElement) and isinstance(el.key, cst.SimpleString):
                        facts.heuristics[el.key.evaluated_value] = self.code(el.value)
        elif name.endswith("jit"):
            for key, value in kwargs.items():
                facts.jit_kwargs[key] = self.code(value)

    def _config(self, node: cst.BaseExpression) -> dict[str, str]:
        out: dict[str, str] = {}
        if not isinstance(node, cst.Call):
            return {"source": self.code(node)}
        for i, arg in enumerate(node.args):
            if arg.keyword:
                out[arg.keyword.value] = self.code(arg.value)
            elif i == 0 and isinstance(arg.value, cst.Dict):
                for el in arg.value.elements:
                    if isinstance(el, cst.DictElement) and isinstance(el.key, cst.SimpleString):
                        out[el.key.evaluated_value] = self.code(el.value)
        return out

    # -- loops -----------------------------------------------------------------
    def visit_For(self, node: cst.For) -> None:
        if not self._scopes:
            return
        scope = self._scopes[-1]
        it = node.iter
        kind, kwargs = "iter", {}
        args: list[str] = []
        start_axes: set[int] = set()
        if isinstance(it, cst.Call):
            kind = self._qualify(dotted(it.func)) or "call"
            kwargs = {a.keyword.value: self.code(a.value) for a in it.args if a.keyword}
            positional = [a.value for a in it.args if not a.keyword and a.star == ""]
            args = [self.code(a) for a in positional]
            if len(positional) >= 2:  # range(start, stop[, step]): a start of 0 is implied otherwise
                start_axes = self._pid_deps(positional[0], scope)
        stages = kwargs.get("num_stages")
        loop = LoopFacts(
            line=self.line(node),
            end_line=self.end_line(node),
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
        for n in [node.target, *[e.value for e in getattr(node.target, "elements", [])]]:
            if isinstance(n, cst.Name):
                scope.pid_deps[n.value] = deps
                scope.var_deps[n.value] = vdeps

    def leave_For(self, original_node: cst.For) -> None:
        if self._scopes:
            self._scopes[-1].loop_stack.pop()

    def _mark_assigned(self, scope: _Scope, target: cst.BaseExpression) -> None:
        """Record names bound by `target` in every loop that encloses it."""
        if not scope.loop_stack:
            return
        names = []
        stack = [target]
        while stack:
            n = stack.pop()
            if isinstance(n, cst.Name):
                names.append(n.value)
            elif isinstance(n, (cst.Tuple, cst.List)):
                stack.extend(e.value for e in n.elements)
        enclosing = set(scope.loop_stack)
        for lp in scope.loops:
            if lp.line in enclosing:
                lp.assigned.extend(n for n in names if n not in lp.assigned)

    def visit_While(self, node: cst.While) -> None:
        if not self._scopes:
            return
        scope = self._scopes[-1]
        loop = LoopFacts(
            line=self.line(node), end_line=self.end_line(node), kind="while", target="", iter=self.code(node.test),
            depth=len(scope.loop_stack),
        )
        scope.loops.append(loop)
        scope.loop_stack.append(loop.line)

    def leave_While(self, original_node: cst.While) -> None:
        if self._scopes:
            self._scopes[-1].loop_stack.pop()

    # -- assignments: origins and dtypes ---------------------------------------
    def visit_Assign(self, node: cst.Assign) -> None:
        if not self._scopes:
            # module-level names (CP_DOT_PRECISION = tl.constexpr('tf32x3')) are
            # kept as source text so predicates can read constants passed by name
            for t in node.targets:
                if isinstance(t.target, cst.Name):
                    self.constants[t.target.value] = self.code(node.value)
            return
        targets = []
        for t in node.targets:
            if isinstance(t.target, cst.Name):
                targets.append(t.target.value)
            elif isinstance(t.target, cst.Tuple):
                targets.extend(el.value.value for el in t.target.elements if isinstance(el.value, cst.Name))
        scope = self._scopes[-1]
        value = node.value
        for t in node.targets:
            self._mark_assigned(scope, t.target)
        self._assign_deps(node, scope)
        origin = self._origin(value)
        dtype = self._dtype(value, scope)
        for name in targets:
            scope.assigns[name] = (self.line(node), self.code(value))
        # `B, T, H, K = q.shape` -> B: (q.shape)[0], ...; `a, b = x, y` -> pairwise
        for t in node.targets:
            if isinstance(t.target, cst.Tuple):
                for i, el in enumerate(t.target.elements):
                    if isinstance(el.value, cst.Name):
                        if isinstance(value, cst.Tuple) and len(value.elements) == len(t.target.elements):
                            scope.assigns[el.value.value] = (self.line(node), self.code(value.elements[i].value))
                        else:
                            scope.assigns[el.value.value] = (self.line(node), f"({self.code(value)})[{i}]")
        for name in targets:
            if origin:
                scope.origins[name] = origin
            elif name in scope.origins and not isinstance(value, cst.Call):
                pass  # p = tl.advance(p, ...) keeps its origin through _origin
            if dtype:
                scope.dtypes[name] = dtype

    def _assign_deps(self, node: cst.Assign, scope: _Scope) -> None:
        value = node.value
        for t in node.targets:
            tgt = t.target
            if isinstance(tgt, cst.Tuple) and isinstance(value, cst.Tuple) and len(tgt.elements) == len(value.elements):
                for el, v in zip(tgt.elements, value.elements):
                    if isinstance(el.value, cst.Name):
                        scope.pid_deps[el.value.value] = self._pid_deps(v.value, scope)
                        scope.var_deps[el.value.value] = self._var_deps(v.value, scope)
            else:
                deps = self._pid_deps(value, scope)
                vdeps = self._var_deps(value, scope)
                names = [tgt] if isinstance(tgt, cst.Name) else [e.value for e in getattr(tgt, "elements", [])]
                for n in names:
                    if isinstance(n, cst.Name):
                        scope.pid_deps[n.value] = deps
                        scope.var_deps[n.value] = vdeps

    def _pid_deps(self, node: cst.CSTNode, scope: _Scope) -> set[int]:
        """program_id axes an expression depends on, through earlier assignments."""
        out: set[int] = set()
        stack = [node]
        while stack:
            n = stack.pop()
            if isinstance(n, cst.Name):
                out |= scope.pid_deps.get(n.value, set())
            elif isinstance(n, cst.Call) and self._qualify(dotted(n.func)) == "tl.program_id":
                axis = next((a.value for a in n.args), None)
                if isinstance(axis, cst.Integer):
                    out.add(int(axis.value))
                continue
            stack.extend(n.children)
        return out

    def _var_deps(self, node: cst.CSTNode, scope: _Scope) -> set[str]:
        """Variables an expression derives from, through earlier assignments."""
        out: set[str] = set()
        stack = [node]
        while stack:
            n = stack.pop()
            if isinstance(n, cst.Name):
                out.add(n.value)
                out |= scope.var_deps.get(n.value, set())
            elif isinstance(n, cst.Attribute):
                stack.append(n.value)  # tl.float32 -> tl; x.shape -> x
                continue
            stack.extend(n.children)
        return out

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        if self._scopes:
            self._mark_assigned(self._scopes[-1], node.target)
        if self._scopes and isinstance(node.target, cst.Name):
            self._scopes[-1].var_deps.setdefault(node.target.value, set()).update(
                self._var_deps(node.value, self._scopes[-1])
            )
        if self._scopes and isinstance(node.target, cst.Name):
            self._scopes[-1].pid_deps.setdefault(node.target.value, set()).update(
                self._pid_deps(node.value, self._scopes[-1])
            )
        if self._scopes and isinstance(node.target, cst.Name):
            scope = self._scopes[-1]
            dtype = self._dtype(node.value, scope)
            if dtype and node.target.value not in scope.dtypes:
                scope.dtypes[node.target.value] = dtype
            # accumulators (b_sq += b_x * b_x) tell what a loop reduces
            op = type(node.operator).__name__.replace("Assign", "").lower()
            scope.accumulates.setdefault(node.target.value, []).append(f"{op}:{self.code(node.value)}")

    def _origin(self, value: cst.BaseExpression) -> str:
        if isinstance(value, cst.Call):
            name = self._qualify(dotted(value.func))
            if name in ("tl.advance",) and value.args:
                inner = value.args[0].value
                if isinstance(inner, cst.Name) and self._scopes:
                    return self._scopes[-1].origins.get(inner.value, "")
            return name
        return ""

    def _dtype(self, value: cst.BaseExpression, scope: _Scope) -> str:
        """Best-effort dtype of an expression; '' when it cannot be read."""
        if isinstance(value, cst.Call):
            func = value.func
            name = self._qualify(dotted(func))
            kw = {a.keyword.value: a.value for a in value.args if a.keyword}
            if isinstance(func, cst.Attribute) and func.attr.value == "to" and value.args:
                return _dtype_name(self._qualify(dotted(value.args[0].value)))
            if name in ("tl.zeros", "tl.full", "tl.zeros_like", "tl.full_like") and "dtype" in kw:
                return _dtype_name(self._qualify(dotted(kw["dtype"])))
            if name == "tl.dot":
                return _dtype_name(self._qualify(dotted(kw["out_dtype"]))) if "out_dtype" in kw else "float32"
            if name in ("tl.exp", "tl.exp2", "tl.log", "tl.log2", "tl.sqrt", "tl.rsqrt", "tl.sigmoid", "tl.sum", "tl.max", "tl.where") and value.args:
                # elementwise math keeps the operand's dtype
                return self._dtype(value.args[-1].value if name == "tl.where" else value.args[0].value, scope)
        if isinstance(value, cst.Name):
            return scope.dtypes.get(value.value, "")
        if isinstance(value, cst.BinaryOperation):
            left, right = self._dtype(value.left, scope), self._dtype(value.right, scope)
            return left or right
        if isinstance(value, cst.UnaryOperation):
            return self._dtype(value.expression, scope)
        if isinstance(value, cst.Subscript):
            return self._dtype(value.value, scope)
        return ""

    # -- calls and launches ----------------------------------------------------
    def _reads_memory(self, node: cst.CSTNode, scope: _Scope) -> bool:
        """Whether an expression loads from memory (tl.load, desc.load) or uses a loaded variable."""
        stack = [node]
        while stack:
            n = stack.pop()
            if isinstance(n, cst.Name) and n.value in scope.loaded:
                return True
            if isinstance(n, cst.Call):
                if self._qualify(dotted(n.func)) == "tl.load":
                    return True
                if isinstance(n.func, cst.Attribute) and n.func.attr.value in ("load", "gather") and self.in_kernel:
                    return True
            stack.extend(n.children)
        return False

    def _track_loaded(self, targets: list[cst.BaseExpression], value: cst.CSTNode, scope: _Scope, augmented: bool = False) -> None:
        reads = self._reads_memory(value, scope)
        stack = list(targets)
        while stack:
            n = stack.pop()
            if isinstance(n, cst.Name):
                if reads:
                    scope.loaded.add(n.value)
                elif not augmented:
                    scope.loaded.discard(n.value)
            elif isinstance(n, (cst.Tuple, cst.List)):
                stack.extend(e.value for e in n.elements)

    def leave_Assign(self, original_node: cst.Assign) -> None:
        if self._scopes:
            self._track_loaded([t.target for t in original_node.targets], original_node.value, self._scopes[-1])

    def leave_AugAssign(self, original_node: cst.AugAssign) -> None:
        if self._scopes:
            self._track_loaded([original_node.target], original_node.value, self._scopes[-1], augmented=True)

    def _module_call(self, node: cst.Call) -> None:
        """A call outside any function: `_lib = ctypes.CDLL(None)`, `triton.set_allocator(...)`."""
        if isinstance(node.func, cst.Subscript):
            return
        name = self._qualify(dotted(node.func))
        if not name and isinstance(node.func, cst.Attribute):
            name = "." + node.func.attr.value
        self.module_calls.append(
            CallSite(
                name=name,
                line=self.line(node),
                args=[self.code(a.value) for a in node.args if not a.keyword and a.star == ""],
                kwargs={a.keyword.value: self.code(a.value) for a in node.args if a.keyword},
            )
        )

    def visit_Call(self, node: cst.Call) -> None:
        if not self._scopes:
            self._module_call(node)
            return
        scope = self._scopes[-1]
        func = node.func
        # kernel[grid](...) launch
        if isinstance(func, cst.Subscript) and not self.in_kernel:
            self._launch(node, func, scope)
            return
        name = self._qualify(dotted(func))
        receiver = ""
        if not name and isinstance(func, cst.Attribute):
            name = "." + func.attr.value  # method on an expression: x.to(...)
        elif isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value in scope.origins:
            receiver = scope.origins[func.value.value]  # desc.load(...) on a tensor descriptor
        args = [self.code(a.value) for a in node.args if not a.keyword and a.star == ""]
        kwargs = {a.keyword.value: self.code(a.value) for a in node.args if a.keyword}
        operand_dtypes = []
        if name == "tl.dot":
            operand_dtypes = [self._dtype(a.value, scope) for a in node.args[:2] if not a.keyword]
        first_origin = ""
        if node.args and isinstance(node.args[0].value, cst.Name):
            first_origin = scope.origins.get(node.args[0].value.value, "")
        scope.calls.append(
            CallSite(
                name=name,
                line=self.line(node),
                args=args,
                kwargs=kwargs,
                loops=list(scope.loop_stack),
                function=scope.name,
                receiver=receiver,
                first_arg_origin=first_origin,
                operand_dtypes=operand_dtypes,
                pid_axes=sorted(set().union(*(self._pid_deps(a.value, scope) for a in node.args)) if node.args else set()),
                depends_on=sorted(set().union(*(self._var_deps(a.value, scope) for a in node.args)) if node.args else set()),
            )
        )

    def _launch(self, node: cst.Call, func: cst.Subscript, scope: _Scope) -> None:
        kernel = dotted(func.value)
        if not kernel:
            return
        grid = self.code(func.slice[0].slice.value) if func.slice and isinstance(func.slice[0].slice, cst.Index) else ""
        grid_node = func.slice[0].slice.value if func.slice and isinstance(func.slice[0].slice, cst.Index) else None
        dims = len(grid_node.elements) if isinstance(grid_node, cst.Tuple) else (1 if grid_node is not None else 0)
        kwargs = {a.keyword.value: self.code(a.value) for a in node.args if a.keyword}
        self.launches.append(
            LaunchFacts(
                kernel=kernel,
                function=scope.name,
                line=self.line(node),
                grid=grid,
                grid_dims=dims if not isinstance(grid_node, cst.Lambda) else 0,
                grid_is_callable=isinstance(grid_node, (cst.Lambda, cst.Name)),
                args=[self.code(a.value) for a in node.args if not a.keyword],
                kwargs=kwargs,
                loops=list(scope.loop_stack),
            )
        )


def _dtype_name(name: str) -> str:
    short = name.rsplit(".", 1)[-1]
    return short if short in _FLOAT_DTYPES or short.startswith(("int", "uint", "float")) else ""


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

    expanded = {k.name: expand(k, frozenset({k.name})) for k in kernels}
    for k in kernels:
        k.calls = expanded[k.name]
        k.helpers = sorted({c.name for c in k.calls if c.name in by_name})


def parse(source: str, path: str = "<string>") -> FileFacts:
    try:
        module = cst.parse_module(source)
    except cst.ParserSyntaxError as exc:
        raise FactsError(f"{path}:{exc.raw_line}: syntax error: {exc.message}") from None
    except Exception as exc:  # libcst raises a few non-syntax errors on odd input
        raise FactsError(f"{path}: cannot parse: {exc}") from None
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    ex = _Extractor(module, path)
    wrapper.visit(ex)
    _inline_helpers(ex.kernels)
    by_kernel = {k.name: k for k in ex.kernels}
    for launch in ex.launches:
        target = by_kernel.get(launch.kernel.rsplit(".", 1)[-1])
        if target is not None:
            target.launches.append(launch)
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
        docstring=(module.get_docstring() or "").strip(),
        lines=source.count("\n") + 1,
    )
