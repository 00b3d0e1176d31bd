"""Bottleneck estimate of one kernel launch from its facts, shapes and a GPU.

The estimate walks what the facts already hold: the launcher's assignments
(to size the grid and the constexprs), the kernel's `tl.arange` block sizes (to
size each load, store and `tl.dot`), and loop trip counts. It counts bytes and
FLOPs per launch, places the kernel against the roofline ridge, sizes the grid
against the SMs, and classifies. Every number that decided the verdict is
kept in `Bottleneck.numbers` and explained in `rationale`.

Anything it cannot size (a shape the user did not give) is reported, never
guessed silently; with no shapes at all only the static hazards are classified.
"""
from __future__ import annotations

import ast
import math
import re
from dataclasses import dataclass, field

from patterns.core.hardware import GPU
from patterns.retriever.cache_model import kernel_env, l2_reuse
from patterns.core.predicates import Subject, evaluate
from patterns.core.facts_types import FileFacts, KernelFacts
from patterns.core.records import Bottleneck
from patterns.core.schema import BottleneckClass, Condition

# the evaluator and the dtype tables live with the launcher replay; re-exported for callers
from patterns.retriever.launcher import DTYPE_ALIASES, DTYPE_BYTES, Tensor, Unknown, dotted as _dotted, free_names, safe_eval  # noqa: E402,F401


# --------------------------------------------------------------------------------------
# sizing a launch
# --------------------------------------------------------------------------------------


@dataclass
class LaunchSize:
    programs: int | None = None
    grid: tuple[int, ...] | None = None
    binds: dict[str, int] = field(default_factory=dict)  # kernel params with known values
    tensors: dict[str, Tensor] = field(default_factory=dict)  # pointer params bound to a --input tensor
    num_warps: int = 4
    num_stages: int = 3
    # the launch passes num_warps as something the replay cannot evaluate (`BLOCK, num_warps =
    # calculate_settings(n)` in another module): Triton's default of 4 is then no estimate
    num_warps_unknown: str = ""
    assumptions: list[str] = field(default_factory=list)
    unknown: set[str] = field(default_factory=set)  # names the user can give (--shape NAME=, --input NAME=)
    unreplayable: list[str] = field(default_factory=list)  # what no name can fix: helpers, comprehensions
    tensor_names: set[str] = field(default_factory=set)  # launcher names used as tensors (x.shape, x.stride(0))


def _missing(size: LaunchSize, expr: str, env: dict, exc: Unknown, assigned: set[str], what: str) -> None:
    names = [n for n in free_names(expr, env) if n not in assigned]
    if names:
        size.unknown.update(names)
    elif str(exc).isidentifier() and str(exc) not in assigned:
        size.unknown.add(str(exc))
    elif not any(n in assigned for n in free_names(expr, env)):
        size.unreplayable.append(f"{what} `{expr.strip()[:48]}` ({exc})")


def sized_launch(facts: FileFacts, kernel: KernelFacts):
    """The launch the estimate sizes: the first whose grid reads some name. A grid of literals
    (`kernel[(2 * 2,)](...)` in a once-per-device self-check or a warm-up) is a fixed launch whatever
    the user's sizes; it is sized only when no other launch exists."""
    for la in kernel.launches:
        grid = la.grid
        assigns = facts.host_assigns.get(la.function, {})
        if grid in assigns:
            grid = assigns[grid][1]
        if free_names(grid, {}) or re.search(r"\b[A-Za-z_]\w*\s*\(", grid):
            return la
    return kernel.launches[0] if kernel.launches else None


def size_launch(facts: FileFacts, kernel: KernelFacts, shapes: dict[str, int], inputs: dict[str, Tensor] | None = None) -> LaunchSize:
    size = LaunchSize()
    inputs = dict(inputs or {})
    launch = sized_launch(facts, kernel)
    env: dict = {**shapes, **inputs}
    params = [p.name for p in kernel.params]
    if launch is not None:
        # parameters the caller left at their defaults (cu_seqlens=None, scale=None, BLOCK=1024)
        for name, expr in facts.host_defaults.get(launch.function, {}).items():
            if name not in env:
                try:
                    env[name] = safe_eval(expr, {})
                except Unknown:
                    pass
        assigns = facts.host_assigns.get(launch.function, {})
        texts = [e for _, e in assigns.values()] + launch.args + list(launch.kwargs.values()) + [launch.grid]
        size.tensor_names = {m for t in texts for m in re.findall(r"\b([A-Za-z_]\w*)\.(?:shape|stride|size|numel|dim|view|reshape|dtype|device|contiguous|element_size)\b", t)}
        size.tensor_names |= {m for t in texts for m in re.findall(r"torch\.\w+_like\(\s*([A-Za-z_]\w*)", t)}
        # replay the launcher's assignments in line order; user shapes and inputs win
        for var, (line, expr) in sorted(assigns.items(), key=lambda kv: kv[1][0]):
            if var in shapes or var in inputs or expr.lstrip().startswith("lambda"):
                continue  # a lambda is replayed where it is used (the grid)
            try:
                env[var] = safe_eval(expr, env)
            except Unknown as exc:
                _missing(size, expr, env, exc, set(assigns), f"line {line}")
        for name, expr in zip(params, launch.args):
            _bind(size, env, name, expr)
        for name, expr in launch.kwargs.items():
            if name == "num_warps" or name == "num_stages":
                try:
                    setattr(size, name, int(safe_eval(expr, env)))
                except (Unknown, TypeError, ValueError):
                    if name == "num_warps":
                        size.num_warps_unknown = expr.strip()
            elif name in params:
                _bind(size, env, name, expr)
    for name, value in shapes.items():
        if kernel.param(name) is not None:
            size.binds.setdefault(name, value)
    for name, t in inputs.items():  # a kernel launched elsewhere: inputs named by its pointer parameters
        if kernel.param(name) is not None:
            size.tensors.setdefault(name, t)
    for p in kernel.params:
        if p.name not in size.binds and p.default is not None:
            try:
                size.binds[p.name] = safe_eval(p.default, {})
            except Unknown:
                pass
    if kernel.autotune and kernel.autotune.configs:
        cfg = kernel.autotune.configs[0]
        for k, v in cfg.items():
            if k in ("num_warps", "num_stages"):
                try:
                    setattr(size, k, int(v))
                except (TypeError, ValueError):
                    pass
            elif k != "source" and k not in size.binds:
                try:
                    size.binds[k] = safe_eval(v, {})
                except Unknown:
                    pass
        size.assumptions.append("autotuned: sized with the first config")
    for name, expr in kernel.heuristics.items():
        if name in size.binds:
            continue
        body = expr.split(":", 1)[1] if expr.startswith("lambda") else expr
        arg = expr[len("lambda"):expr.index(":")].strip() if expr.startswith("lambda") else "args"
        try:
            size.binds[name] = safe_eval(body, {arg: dict(size.binds)})
        except Unknown:
            pass
    if launch is not None and launch.grid:
        grid_expr = launch.grid
        assigns = facts.host_assigns.get(launch.function, {})
        if grid_expr in assigns:
            grid_expr = assigns[grid_expr][1]
        genv = dict(env)
        if grid_expr.startswith("lambda"):
            arg = grid_expr[len("lambda"):grid_expr.index(":")].strip()
            genv[arg] = dict(size.binds)
            grid_expr = grid_expr.split(":", 1)[1]
        try:
            g = safe_eval(grid_expr, genv)
            g = g if isinstance(g, tuple) else (g,)
            size.grid = tuple(int(x) for x in g)
            size.programs = int(math.prod(size.grid))
        except (Unknown, TypeError, ValueError) as exc:
            _missing(size, grid_expr, genv, exc if isinstance(exc, Unknown) else Unknown(str(exc)), set(assigns) - set(env), "grid")
    # names the kernel's own sizes need: unbound constexprs and int parameters its loops and masks use
    return size


def _bind(size: LaunchSize, env: dict, name: str, expr: str) -> None:
    try:
        value = safe_eval(expr, env)
    except Unknown:
        return
    if isinstance(value, Tensor):
        size.tensors[name] = value
    elif isinstance(value, (int, float, bool)):
        size.binds[name] = value


# --------------------------------------------------------------------------------------
# sizing the kernel body
# --------------------------------------------------------------------------------------


def _broadcast(*shapes: tuple) -> tuple:
    shapes = [sh for sh in shapes if sh]
    if not shapes:
        return ()
    n = max(len(sh) for sh in shapes)
    out = []
    for i in range(n):
        dims = [sh[i - n + len(sh)] for sh in shapes if i - n + len(sh) >= 0]
        real = [d for d in dims if d != 1]
        out.append(real[0] if real else 1)
    return tuple(out)


class _Shapes:
    """Block shapes of a kernel's local variables, as tuples of size names (BK, BV) or ints."""

    def __init__(self, kernel: KernelFacts):
        self.env: dict[str, tuple] = {}
        # first definitions, then the last ones: `offs = tl.where(offs < M, offs, 0)` keeps the shape `offs` had
        for var, (_, expr) in sorted(kernel.first_assigns.items(), key=lambda kv: kv[1][0]):
            try:
                self.env[var] = self.of(ast.parse(expr.strip(), mode="eval").body)
            except SyntaxError:
                continue
        for var, (_, expr) in sorted(kernel.assigns.items(), key=lambda kv: kv[1][0]):
            try:
                shape = self.of(ast.parse(expr.strip(), mode="eval").body)
            except SyntaxError:
                continue
            if shape or var not in self.env:
                self.env[var] = shape

    def parse(self, expr: str) -> tuple:
        try:
            return self.of(ast.parse(expr.strip(), mode="eval").body)
        except SyntaxError:
            return ()

    def of(self, n: ast.AST) -> tuple:
        if isinstance(n, ast.Name):
            return self.env.get(n.id, ())
        if isinstance(n, ast.BinOp):
            return _broadcast(self.of(n.left), self.of(n.right))
        if isinstance(n, ast.BoolOp):
            return _broadcast(*(self.of(v) for v in n.values))
        if isinstance(n, ast.Compare):
            return _broadcast(self.of(n.left), *(self.of(c) for c in n.comparators))
        if isinstance(n, ast.UnaryOp):
            return self.of(n.operand)
        if isinstance(n, ast.IfExp):
            return _broadcast(self.of(n.body), self.of(n.orelse))
        if isinstance(n, ast.Attribute) and n.attr == "T":  # `w.T`: tl.trans
            return tuple(reversed(self.of(n.value)))
        if isinstance(n, ast.Subscript):
            base = self.of(n.value)
            idx = n.slice.elts if isinstance(n.slice, ast.Tuple) else [n.slice]
            if not any(isinstance(i, ast.Constant) and i.value is None for i in idx):
                return base
            out, it = [], iter(base)
            for i in idx:
                if isinstance(i, ast.Constant) and i.value is None:
                    out.append(1)
                else:
                    out.append(next(it, 1))
            return tuple(out)
        if isinstance(n, ast.Call):
            name = _dotted(n.func)
            args = n.args
            kw = {k.arg: k.value for k in n.keywords}
            if name == "tl.arange" and len(args) == 2:
                return (_size_name(args[1]),)
            if name in ("tl.zeros", "tl.full", "tl.empty") and args:
                shape = args[0]
                if isinstance(shape, (ast.List, ast.Tuple)):
                    return tuple(_size_name(e) for e in shape.elts)
            if name == "tl.make_block_ptr" and "block_shape" in kw and isinstance(kw["block_shape"], (ast.List, ast.Tuple)):
                return tuple(_size_name(e) for e in kw["block_shape"].elts)
            if name in ("tl.dot", "tl.dot_scaled") and len(args) >= 2:
                a, b = self.of(args[0]), self.of(args[3 if name == "tl.dot_scaled" and len(args) >= 4 else 1])
                return (a[0] if a else 1, b[-1] if b else 1)
            if name == "tl.trans" and args:
                return tuple(reversed(self.of(args[0])))
            if name in ("tl.sum", "tl.max", "tl.min", "tl.argmax", "tl.argmin", "tl.reduce") and args:
                sh = self.of(args[0])
                axis = kw.get("axis", args[1] if len(args) > 1 else None)
                if isinstance(axis, ast.Constant) and isinstance(axis.value, int) and sh:
                    return tuple(d for i, d in enumerate(sh) if i != axis.value % len(sh))
                return ()
            if name in ("tl.advance",) and args:
                return self.of(args[0])
            if isinstance(n.func, ast.Attribute) and n.func.attr in ("to", "load") and not name.startswith("tl."):
                return self.of(n.func.value) if n.func.attr == "to" else ()
            # elementwise tl.* math and tl.load/tl.where: broadcast of the arguments
            return _broadcast(*(self.of(a) for a in args))
        return ()


def _size_name(n: ast.AST):
    if isinstance(n, ast.Constant) and isinstance(n.value, int):
        return n.value
    return _dotted(n) or ast.dump(n)[:20]


def _elements(shape: tuple, binds: dict) -> int | None:
    total = 1
    for d in shape:
        v = d if isinstance(d, int) else binds.get(d)
        if v is None:
            return None
        total *= int(v)
    return total


def _trip_count(loop_iter: str, binds: dict) -> int | None:
    m = re.match(r"^(?:tl\.)?(?:range|static_range)\((.*)\)$", loop_iter.strip(), re.S)
    if not m:
        return None
    args = [a.strip() for a in _split_args(m.group(1)) if "=" not in a.split("(")[0]]
    try:
        vals = [int(safe_eval(a, binds)) for a in args]
    except Unknown:
        return None
    start, stop, step = (0, vals[0], 1) if len(vals) == 1 else (vals[0], vals[1], vals[2] if len(vals) > 2 else 1)
    return max(0, -(-(stop - start) // step))


def _split_args(s: str) -> list[str]:
    out, depth, cur = [], 0, ""
    for ch in s:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    return out + ([cur] if cur.strip() else [])


@dataclass
class BodyCost:
    bytes: float = 0.0
    dot_flops: float = 0.0
    ew_flops: float = 0.0
    transcendentals: float = 0.0
    largest_tile: int = 0
    block_1d: int = 0  # elements of the largest 1-D block value
    tensors_1d: int = 0  # live 1-D block values of that size (loads and what is computed from them)
    unsized: list[str] = field(default_factory=list)
    dot_dtype: str = "bfloat16"
    elements: dict[str, int] = field(default_factory=dict)  # pointer param -> elements loaded/stored per program
    load_bytes: dict[int, float] = field(default_factory=dict)  # line of a tl.load -> bytes per program
    dot_trips: int | None = None  # iterations of the loops around the first in-loop tl.dot
    # what leaves the FLOP count open: tl.dot calls whose operands could not be sized, and loops of
    # unknown trip count around a tl.dot (counted once, they turn a K or KV loop into one step)
    open_dots: list[str] = field(default_factory=list)


def body_cost(kernel: KernelFacts, binds: dict, elem_bytes: dict[str, int], default_bytes: int) -> BodyCost:
    """Per-program bytes and FLOPs, multiplied through enclosing loop trip counts."""
    cost = BodyCost()
    shapes = _Shapes(kernel)
    # the kernel's own scalar arithmetic (k_tiles = tl.cdiv(K, BLOCK_K)) sizes its loops too
    binds = kernel_env(kernel, binds)
    loops = {lp.line: lp for lp in kernel.loops}
    trips: dict[int, int | None] = {line: _trip_count(lp.iter, binds) for line, lp in loops.items()}
    one_d: dict[str, int] = {}
    for var, sh in shapes.env.items():
        n = _elements(sh, binds)
        if n and len(sh) >= 2:
            cost.largest_tile = max(cost.largest_tile, n)
        elif n and len(sh) == 1 and var in kernel.loaded:
            one_d[var] = n
    if one_d:
        cost.block_1d = max(one_d.values())
        cost.tensors_1d = sum(1 for n in one_d.values() if n == cost.block_1d)
    for c in kernel.calls:
        mult = 1
        for line in c.loops:
            t = trips.get(line)
            if t is None:
                cost.unsized.append(f"loop at line {line}")
                if c.name in ("tl.dot", "tl.dot_scaled"):
                    lp = loops.get(line)
                    what = f"`{lp.iter.strip()[:40]}`" if lp is not None and lp.iter else "its bound"
                    cost.open_dots.append(f"trip count of the loop at line {line} around tl.dot ({what})")
                t = 1
            mult *= t
        if c.name in ("tl.load", "tl.store") and c.args:
            ptr = c.args[0]
            n = _elements(shapes.parse(ptr), binds)
            if n is None:
                cost.unsized.append(f"{c.name} at line {c.line}")
                continue
            base = _pointer_param(ptr, kernel)
            nbytes = elem_bytes.get(base, default_bytes)
            cost.bytes += n * nbytes * mult
            if c.name == "tl.load":
                cost.load_bytes[c.line] = cost.load_bytes.get(c.line, 0) + n * nbytes * mult
            if base:
                cost.elements[base] = cost.elements.get(base, 0) + n * mult
        elif c.name in ("tl.dot", "tl.dot_scaled") and len(c.args) >= (4 if c.name == "tl.dot_scaled" else 2):
            # tl.dot_scaled(lhs, lhs_scale, lhs_format, rhs, rhs_scale, rhs_format): rhs is [K, N], two
            # e2m1 (fp4) values to a byte along K
            scaled = c.name == "tl.dot_scaled"
            a, b = shapes.parse(c.args[0]), shapes.parse(c.args[3] if scaled else c.args[1])
            n = _elements((*a[:1], *b), binds) if a and b else None
            if n is None:
                cost.unsized.append(f"{c.name} at line {c.line}")
                cost.open_dots.append(f"operand shapes of {c.name} at line {c.line}")
                continue
            if scaled and "e2m1" in (c.args[5] if len(c.args) > 5 else c.kwargs.get("rhs_format", "")):
                n *= 2
            cost.dot_flops += 2 * n * mult
            if scaled:
                cost.dot_dtype = "float8"  # microscaled fp8/fp4 operands run at the fp8 tensor-core rate (at least)
            if c.loops and cost.dot_trips is None:
                cost.dot_trips = mult
            if any(dt == "float32" for dt in c.operand_dtypes):
                prec = c.kwargs.get("input_precision", "").strip("'\"")
                cost.dot_dtype = "float32" if prec == "ieee" or c.kwargs.get("allow_tf32") == "False" else "tf32"
        elif c.name in ("tl.exp", "tl.exp2", "tl.log", "tl.log2", "tl.sqrt", "tl.rsqrt", "tl.sigmoid", "tl.math.exp", "tl.cos", "tl.sin"):
            n = _elements(shapes.parse(c.args[0]), binds) if c.args else 1
            cost.transcendentals += (n or 1) * mult
        elif c.name in ("tl.sum", "tl.max", "tl.min"):
            n = _elements(shapes.parse(c.args[0]), binds) if c.args else 1
            cost.ew_flops += (n or 1) * mult
    # elementwise arithmetic in assignments: one FLOP per operator per element
    for var, (line, expr) in kernel.assigns.items():
        if "tl.load" in expr or "tl.dot" in expr:
            continue
        ops = len(re.findall(r"(?<![\*/])[\+\-\*/](?![\*/=])", expr))
        sh = shapes.env.get(var)
        if ops and sh:
            n = _elements(sh, binds) or 0
            mult = 1
            for lp in kernel.loops:
                if lp.line <= line <= lp.end_line:
                    mult *= trips.get(lp.line) or 1
            cost.ew_flops += ops * n * mult
    return cost


def _pointer_param(ptr_expr: str, kernel: KernelFacts, seen: frozenset[str] = frozenset()) -> str:
    """Kernel parameter that is the base of a pointer expression (q, h0, ...)."""
    params = {p.name for p in kernel.params if not p.constexpr}
    for n in re.findall(r"\b[A-Za-z_]\w*\b", ptr_expr):
        if n in params:
            return n
        if n in kernel.assigns and n not in seen:  # p_q = q + ... ; tl.load(p_q)
            inner = _pointer_param(kernel.assigns[n][1], kernel, seen | {n})
            if inner:
                return inner
    return ""


# --------------------------------------------------------------------------------------
# classification
# --------------------------------------------------------------------------------------

# classes found by reading the code, not by sizing it: a pattern's own conditions detect them
STATIC_CLASSES = {BottleneckClass.numerics, BottleneckClass.host}

_NUMERICS = Condition.model_validate({"dot": {"precision": ["default", "tf32"], "operand_dtype": ["float32"], "in_loop": True}})
_HOST = Condition.model_validate({"file_calls": {"name": [
    r"ctypes\.(PyDLL|pydll\.LoadLibrary)", r"ctypes\.pythonapi\..*",  # native calls that keep the GIL
    r".*\.item", r".*\.tolist", r"torch\.cuda\.synchronize",  # host syncs in a launcher
]}})


_SYNC = re.compile(r"(^|\.)(item|tolist|cpu|numpy|synchronize)$|^torch\.cuda\.synchronize$")
_GIL = re.compile(r"^ctypes\.(PyDLL|pydll\.LoadLibrary)|^ctypes\.pythonapi\.")


def host_delays(facts: FileFacts, kernel: KernelFacts) -> list[str]:
    """Host syncs and GIL-holding native calls that delay this kernel's launches: in the launching
    function before the launch, or in a loop around it (a sync elsewhere in the file delays others)."""
    out = []
    for la in kernel.launches:
        for c in facts.host_calls:
            if c.function != la.function:
                continue
            if not (_SYNC.search(c.name) or _GIL.search(c.name)):
                continue
            shared_loop = set(c.loops) & set(la.loops)
            if c.line < la.line or shared_loop:
                where = f"in the loop at line {min(shared_loop)}" if shared_loop else f"before the launch at line {la.line}"
                out.append(f"`{c.name.lstrip('.')}()` at line {c.line} {where}")
    return list(dict.fromkeys(out))[:3]


@dataclass
class Analysis:
    kernel: str
    primary: Bottleneck
    others: list[Bottleneck]
    gpu: str
    numbers: dict[str, float]
    measured: bool = True  # False when the roofline verdict is a guess (no shapes, no profile)
    # integer kernel parameters the launch replay bound (M from `M, K = a.shape` of an --input): what
    # a pattern's shape conditions are checked against when the user gave no --shape for them
    sizes: dict[str, int] = field(default_factory=dict)

    @property
    def classes(self) -> list[BottleneckClass]:
        return [self.primary.cls, *[b.cls for b in self.others]]

    def strength(self, cls: BottleneckClass) -> float:
        """How strongly the kernel shows `cls`: 1.0 primary, 0.6 secondary, 0 absent.

        Unsized, the memory/compute/occupancy/launch verdict is a guess: the guessed
        class counts 0.5 and every other one 0.4, so code evidence decides instead.
        """
        present = cls in self.classes
        if cls in STATIC_CLASSES or self.measured:
            return 1.0 if cls == self.primary.cls else 0.6 if present else 0.0
        return 0.5 if present else 0.4


def estimate(
    facts: FileFacts,
    kernel: KernelFacts,
    hw: GPU,
    shapes: dict[str, int],
    dtype: str = "bfloat16",
    dtype_overrides: dict[str, str] | None = None,
    inputs: dict[str, Tensor] | None = None,
) -> Analysis:
    dtype = DTYPE_ALIASES.get(dtype, dtype)
    overrides = resolve_overrides(kernel, {k: DTYPE_ALIASES.get(v, v) for k, v in (dtype_overrides or {}).items()})
    found: list[Bottleneck] = []
    nums: dict[str, float] = {}
    size = size_launch(facts, kernel, shapes, inputs)
    elem_bytes = {k: t.element_size() for k, t in size.tensors.items()}
    elem_bytes.update({k: DTYPE_BYTES[v] for k, v in overrides.items()})
    cost = body_cost(kernel, size.binds, elem_bytes, DTYPE_BYTES.get(dtype, 2))
    if size.programs is None and size.tensors:
        # no replayable grid (launched elsewhere, or built by a helper): the programs that
        # cover the largest input at the elements each program reads of it
        cover = [(t.numel(), p, cost.elements[p]) for p, t in size.tensors.items() if cost.elements.get(p)]
        if cover:
            numel, p, per = max(cover)
            size.programs = max(1, -(-numel // per))
            size.assumptions.append(f"grid inferred: {size.programs} programs cover {p}'s {numel} elements at {per} per program")
    # a tl.dot whose FLOPs stay open cannot be placed on the roofline: its bytes alone would call a
    # prefill attention or a GEMM whose K loop is unknown memory-bound
    sized = size.programs is not None and (cost.bytes > 0 or cost.dot_flops > 0) and not cost.open_dots

    subject = Subject(facts, kernel)
    numerics = evaluate(_NUMERICS, subject)
    if numerics.ok:
        found.append(Bottleneck(cls=BottleneckClass.numerics, rationale=[
            f"fp32 tl.dot at default precision (TF32 on NVIDIA) inside a loop at line {', '.join(map(str, numerics.lines))}: "
            "rounding of 2^-11 per product compounds over the chain"]))
    delays = host_delays(facts, kernel)
    if delays:
        found.append(Bottleneck(cls=BottleneckClass.host, rationale=["host code blocks or syncs before this kernel's launch: " + "; ".join(delays)]))
    in_loop_launch = [la for la in kernel.launches if la.loops]
    if in_loop_launch:
        found.append(Bottleneck(cls=BottleneckClass.launch, rationale=[
            f"launched from a Python loop (line {in_loop_launch[0].line}): one launch (~{hw.launch_overhead_us:.0f} µs of host and grid start) per iteration"]))

    if sized:
        programs = size.programs
        bytes_ = cost.bytes * programs
        threads = size.num_warps * 32
        regs_2d = 3 * cost.largest_tile // (2 * max(threads, 1))
        # a 1-D block of N values spreads over 32*num_warps threads: N/threads registers per live tensor
        regs_1d = cost.tensors_1d * cost.block_1d // max(threads, 1)
        regs_per_thread = min(255, 32 + max(regs_2d, regs_1d))
        resident_by_regs = max(1, hw.regs_per_sm // (regs_per_thread * threads))
        resident = max(1, min(resident_by_regs, hw.max_threads_per_sm // threads, 32))
        slots = hw.sm_count * resident
        reuse = l2_reuse(kernel, size.binds, cost.load_bytes, programs, slots, size.grid, hw.l2_mb * 1e6, trips=cost.dot_trips)
        grouped = l2_reuse(kernel, size.binds, cost.load_bytes, programs, slots, size.grid, hw.l2_mb * 1e6, group=8, trips=cost.dot_trips)
        if grouped is not None and reuse is not None and not reuse.order.startswith("grouped"):
            nums["bytes_if_grouped"] = cost.bytes * programs - grouped.saved
        if reuse is not None:
            bytes_ -= reuse.saved
            nums.update({"bytes_without_l2_reuse": reuse.no_reuse_bytes, "wave_programs": reuse.wave,
                         "wave_tile_rows": reuse.rows, "wave_tile_cols": reuse.cols})
        dot_flops = cost.dot_flops * programs
        ew_flops = (cost.ew_flops + cost.transcendentals) * programs
        flops = dot_flops + ew_flops
        bw = hw.bandwidth_tbps * 1e12
        peak_dot = hw.peak(cost.dot_dtype if dot_flops else dtype) * 1e12
        peak_ew = hw.peak("float32") * 1e12
        t_mem = bytes_ / bw
        t_comp = dot_flops / peak_dot + ew_flops / peak_ew
        # registers (above): the largest tile (a dot's fp32 accumulator) lives across the loop with
        # operand tiles about half its size in 16 bits: ~1.5 tiles. Calibrated on Triton's
        # matmul tutorial, whose 128x256 tiles at 8 warps (~200 registers) do not spill.
        waves = programs / slots
        fill = min(1.0, programs / hw.sm_count)
        tail_eff = waves / math.ceil(waves) if waves > 0 else 1.0
        ai = flops / bytes_ if bytes_ else float("inf")
        ridge = hw.ridge(cost.dot_dtype if dot_flops else "float32")
        t_ideal = max(t_mem, t_comp)
        # an under-filled grid cannot reach the device's bandwidth: only `fill` of the SMs pull
        t_est = t_ideal / max(fill, 1e-3) / max(tail_eff if waves > 1 else 1.0, 1e-3)
        nums.update({
            "programs": programs, "sm_count": hw.sm_count, "sm_fill": round(fill, 3), "waves": round(waves, 2),
            "bytes": bytes_, "flops": flops, "dot_flops": dot_flops, "intensity_flop_per_byte": round(ai, 3),
            "ridge_flop_per_byte": round(ridge, 1), "t_memory_us": round(t_mem * 1e6, 3), "t_compute_us": round(t_comp * 1e6, 3),
            "t_estimate_us": round(t_est * 1e6, 3), "launch_overhead_us": hw.launch_overhead_us,
            "regs_per_thread_est": regs_per_thread, "num_warps": size.num_warps,
        })
        verdicts = []
        if t_est * 1e6 < hw.launch_overhead_us:
            verdicts.append(Bottleneck(cls=BottleneckClass.launch, numbers=nums, rationale=[
                f"estimated {t_est * 1e6:.2f} µs of work per launch is below the ~{hw.launch_overhead_us:.0f} µs launch overhead"]))
        if fill < 0.5 or (waves > 1 and tail_eff < 0.75):
            why = (f"grid of {programs} programs fills {fill:.0%} of {hw.sm_count} SMs" if fill < 0.5 else
                   f"{waves:.2f} waves: the last wave runs {waves - math.floor(waves):.0%} full")
            verdicts.append(Bottleneck(cls=BottleneckClass.occupancy, numbers=nums, rationale=[why]))
        if regs_per_thread >= 255 and size.num_warps_unknown and not (kernel.autotune and kernel.autotune.configs):
            size.assumptions.append(f"registers per thread not estimated: the launch's num_warps={size.num_warps_unknown} "
                                    "could not be evaluated (give the names it reads with --shape)")
        elif regs_per_thread >= 255:
            what = (f"tiles of {cost.largest_tile} elements" if regs_2d >= regs_1d else
                    f"{cost.tensors_1d} 1-D block value(s) of {cost.block_1d} elements")
            verdicts.append(Bottleneck(cls=BottleneckClass.occupancy, numbers=nums, rationale=[
                f"{what} over {threads} threads need ~{32 + max(regs_2d, regs_1d)} registers/thread: spills to local memory"]))
        l2 = (f"; L2 reuse ({reuse.order}: a wave of {reuse.wave} programs reads {reuse.rows}x{reuse.cols} tiles' panels"
              f"{'' if reuse.fits_l2 else ', more than L2 holds'}) cuts {_fmt_bytes(reuse.no_reuse_bytes)} of tile loads to {_fmt_bytes(reuse.dram_bytes)}"
              if reuse is not None and reuse.saved > 0 else "")
        roof = Bottleneck(
            cls=BottleneckClass.memory if ai < ridge else BottleneckClass.compute, numbers=nums,
            rationale=[f"{_fmt_bytes(bytes_)} moved and {_fmt_flops(flops)} per launch: intensity {ai:.2f} FLOP/B "
                       f"{'<' if ai < ridge else '≥'} ridge {ridge:.0f} FLOP/B on {hw.name}; memory {t_mem * 1e6:.2f} µs vs compute {t_comp * 1e6:.2f} µs" + l2],
        )
        verdicts.append(roof)
        found = verdicts + found
    else:
        has_dot_loop = any(c.name in ("tl.dot", "tl.dot_scaled") and c.in_loop for c in kernel.calls)
        found.append(Bottleneck(
            cls=BottleneckClass.compute if has_dot_loop else BottleneckClass.memory,
            rationale=[UNKNOWN_PREFIX + why_unsized(kernel, size, cost) + "; patterns ranked on code evidence"
                       + (" (a tl.dot loop hints at compute-bound)" if has_dot_loop else "")],
        ))
    for a in size.assumptions:
        found[0].rationale.append(a)
    for w in truncations(kernel, size.binds):
        found[0].rationale.append(w)
    primary, others = found[0], _dedupe(found[1:], found[0].cls)
    sizes = {n: v for n, v in size.binds.items() if type(v) is int and kernel.param(n) is not None
             and not kernel.param(n).constexpr} if (inputs or shapes) else {}
    if size.tensors:  # the largest tensor the launch passes: whether int32 element offsets can wrap
        sizes[LARGEST_TENSOR] = max(t.numel() for t in size.tensors.values())
    return Analysis(kernel=kernel.name, primary=primary, others=others, gpu=hw.name, numbers=nums, measured=sized, sizes=sizes)


UNKNOWN_PREFIX = "bottleneck unknown: "
# a size patterns may condition on (applies_when.shapes): elements of the largest tensor a launch passes
LARGEST_TENSOR = "largest_tensor_numel"


def truncations(kernel: KernelFacts, binds: dict) -> list[str]:
    """`cols = tl.arange(0, BLOCK); mask = cols < N` outside any loop, with BLOCK < N: the rest of the row is never read."""
    out = []
    for c in kernel.calls:
        if c.name not in ("tl.load", "tl.store") or c.in_loop:
            continue
        mask = c.kwargs.get("mask", c.args[1] if len(c.args) > 1 else "")
        for left, right in re.findall(r"\b([A-Za-z_]\w*)\s*<\s*([A-Za-z_]\w*)\b", mask if "<" in mask else kernel.assigns.get(mask.strip(), (0, ""))[1]):
            expr = kernel.assigns.get(left, (0, ""))[1]
            m = re.fullmatch(r"\s*tl\.arange\(\s*0\s*,\s*([A-Za-z_]\w*)\s*\)\s*", expr)
            if not m or kernel.pid_deps.get(left):
                continue  # offsets that move with the program cover the extent across the grid
            block, extent = binds.get(m.group(1)), binds.get(right)
            if isinstance(block, int) and isinstance(extent, int) and block < extent:
                out.append(f"warning: {m.group(1)}={block} < {right}={extent} at line {c.line}: `{c.name}` with mask `{left} < {right}` "
                           f"and no loop over the rest reads only the first {block} of {extent} elements")
    return list(dict.fromkeys(out))


def why_unsized(kernel: KernelFacts, size: LaunchSize, cost: BodyCost) -> str:
    """Exactly what is missing: the names to give, or what no name can fix."""
    parts = []
    if size.unknown:
        tensors = sorted(n for n in size.unknown if n in size.tensor_names)
        names = sorted(n for n in size.unknown if n not in size.tensor_names)
        flags = [f"--input {n}=D0xD1:DTYPE" for n in tensors[:4]] + [f"--shape {n}=…" for n in names[:6]]
        more = len(tensors[4:]) + len(names[6:])
        parts.append("pass " + " ".join(flags) + (f" (+{more} more)" if more else ""))
    if size.unreplayable:
        parts.append("cannot replay " + "; ".join(size.unreplayable[:2]))
    if not kernel.launches and size.programs is None:
        parts.append("no launch in this file: give the kernel's pointer arguments as --input PARAM=D0xD1:DTYPE to infer the grid")
    elif size.programs is not None and cost.open_dots:
        shown = list(dict.fromkeys(cost.open_dots))
        parts.append("grid sized, tl.dot FLOPs not: " + "; ".join(shown[:2]) + (f" (+{len(shown) - 2} more)" if len(shown) > 2 else ""))
    elif size.programs is not None and not (cost.bytes or cost.dot_flops):
        blocks = sorted({u.split(" at ")[0] for u in cost.unsized})
        parts.append("grid sized, body not: " + (", ".join(cost.unsized[:3]) if cost.unsized else "no load, store or tl.dot") + (
            "; give the block sizes with --shape" if blocks else ""))
    return "not sized: " + ("; ".join(parts) if parts else "the launch is not replayable")


def resolve_overrides(kernel: KernelFacts, overrides: dict[str, str]) -> dict[str, str]:
    """Map `--dtype NAME=...` onto kernel parameters; NAME may be a launcher argument (`state` -> `h`)."""
    params = [p.name for p in kernel.params]
    out = {}
    for name, dt in overrides.items():
        if name in params:
            out[name] = dt
            continue
        for la in kernel.launches:
            for param, expr in [*zip(params, la.args), *la.kwargs.items()]:
                if expr.strip() == name and param in params:
                    out[param] = dt
    return out


def unknown_overrides(kernel: KernelFacts, overrides: dict[str, str]) -> list[str]:
    known = set(resolve_overrides(kernel, {k: "float32" for k in overrides}))
    mapped = {n for n in overrides if n in {p.name for p in kernel.params}}
    for la in kernel.launches:
        params = [p.name for p in kernel.params]
        mapped |= {expr.strip() for param, expr in [*zip(params, la.args), *la.kwargs.items()] if param in known}
    return sorted(set(overrides) - mapped)


def _dedupe(items: list[Bottleneck], primary: BottleneckClass) -> list[Bottleneck]:
    seen, out = {primary}, []
    for b in items:
        if b.cls not in seen:
            seen.add(b.cls)
            out.append(b)
    return out


def _fmt_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} GB"


def _fmt_flops(n: float) -> str:
    for unit in ("FLOP", "KFLOP", "MFLOP", "GFLOP", "TFLOP"):
        if n < 1000 or unit == "TFLOP":
            return f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} TFLOP"


def host_analysis(facts: FileFacts, hw: GPU) -> Analysis:
    """Host-side hazards of a file, for patterns about host code (GIL, syncs)."""
    v = evaluate(_HOST, Subject(facts, None))
    if v.ok:
        b = Bottleneck(cls=BottleneckClass.host, rationale=[f"host code blocks or syncs: {'; '.join(v.reasons)}"])
    else:
        b = Bottleneck(cls=BottleneckClass.memory, rationale=["no host-side hazard found"])
    return Analysis(kernel="<host code>", primary=b, others=[], gpu=hw.name, numbers={})
