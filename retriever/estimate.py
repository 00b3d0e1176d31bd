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
from patterns.core.predicates import Subject, evaluate
from patterns.core.facts_types import FileFacts, KernelFacts
from patterns.core.records import Bottleneck
from patterns.core.schema import BottleneckClass, Condition

DTYPE_BYTES = {"float32": 4, "fp32": 4, "float16": 2, "fp16": 2, "bfloat16": 2, "bf16": 2, "float8": 1, "fp8": 1, "int8": 1, "int32": 4, "int64": 8}
DTYPE_ALIASES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16", "fp8": "float8"}


class Unknown(Exception):
    """An expression refers to something the estimate cannot size."""


# --------------------------------------------------------------------------------------
# a tiny, safe arithmetic evaluator (no eval): the launcher's sizing expressions
# --------------------------------------------------------------------------------------

_FUNCS = {
    "cdiv": lambda a, b: -(-a // b),
    "triton.cdiv": lambda a, b: -(-a // b),
    "next_power_of_2": lambda n: 1 << (int(n) - 1).bit_length() if n > 1 else 1,
    "triton.next_power_of_2": lambda n: 1 << (int(n) - 1).bit_length() if n > 1 else 1,
    "min": min,
    "max": max,
    "int": int,
    "abs": abs,
    "math.ceil": math.ceil,
    "math.sqrt": math.sqrt,
    "float": float,
}


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return ""


def safe_eval(expr: str, env: dict):
    def ev(n: ast.AST):
        if isinstance(n, ast.Expression):
            return ev(n.body)
        if isinstance(n, ast.Constant) and isinstance(n.value, (int, float, bool, str)):
            return n.value
        if isinstance(n, ast.Name):
            if n.id in env:
                return env[n.id]
            raise Unknown(n.id)
        if isinstance(n, ast.Tuple | ast.List):
            return tuple(ev(e) for e in n.elts)
        if isinstance(n, ast.BinOp):
            a, b = ev(n.left), ev(n.right)
            ops = {ast.Add: lambda: a + b, ast.Sub: lambda: a - b, ast.Mult: lambda: a * b, ast.FloorDiv: lambda: a // b,
                   ast.Div: lambda: a / b, ast.Mod: lambda: a % b, ast.Pow: lambda: a**b}
            if type(n.op) in ops:
                return ops[type(n.op)]()
        if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.USub):
            return -ev(n.operand)
        if isinstance(n, ast.Compare) and len(n.ops) == 1:
            a, b = ev(n.left), ev(n.comparators[0])
            ops = {ast.Lt: a < b, ast.LtE: a <= b, ast.Gt: a > b, ast.GtE: a >= b, ast.Eq: a == b, ast.NotEq: a != b}
            return ops[type(n.ops[0])]
        if isinstance(n, ast.IfExp):
            return ev(n.body) if ev(n.test) else ev(n.orelse)
        if isinstance(n, ast.Call):
            name = _dotted(n.func)
            if name in _FUNCS and not n.keywords:
                return _FUNCS[name](*(ev(a) for a in n.args))
            raise Unknown(name or "call")
        if isinstance(n, ast.Subscript):
            base = ev(n.value)
            key = ev(n.slice)
            if isinstance(base, (dict, tuple)):
                return base[key]
        if isinstance(n, ast.Attribute):
            name = _dotted(n)
            if name in env:
                return env[name]
            raise Unknown(name)
        raise Unknown(ast.dump(n)[:40])

    try:
        return ev(ast.parse(expr.strip(), mode="eval"))
    except (SyntaxError, KeyError, IndexError, TypeError, ZeroDivisionError, ValueError):
        raise Unknown(expr) from None


# --------------------------------------------------------------------------------------
# sizing a launch
# --------------------------------------------------------------------------------------


@dataclass
class LaunchSize:
    programs: int | None = None
    binds: dict[str, int] = field(default_factory=dict)  # kernel params with known values
    num_warps: int = 4
    num_stages: int = 3
    assumptions: list[str] = field(default_factory=list)
    unknown: set[str] = field(default_factory=set)


def size_launch(facts: FileFacts, kernel: KernelFacts, shapes: dict[str, int]) -> LaunchSize:
    size = LaunchSize()
    launch = kernel.launches[0] if kernel.launches else None
    env: dict = dict(shapes)
    if launch is not None:
        # replay the launcher's assignments in line order; user shapes win
        for var, (line, expr) in sorted(facts.host_assigns.get(launch.function, {}).items(), key=lambda kv: kv[1][0]):
            if var in shapes:
                continue
            try:
                env[var] = safe_eval(expr, env)
            except Unknown as exc:
                if str(exc).isidentifier():  # a shape the user can give with --shape
                    size.unknown.add(str(exc))
        params = [p.name for p in kernel.params]
        for name, expr in zip(params, launch.args):
            _bind(size, env, name, expr)
        for name, expr in launch.kwargs.items():
            if name == "num_warps" or name == "num_stages":
                try:
                    setattr(size, name, int(safe_eval(expr, env)))
                except Unknown:
                    pass
            elif name in params:
                _bind(size, env, name, expr)
    for name, value in shapes.items():
        if kernel.param(name) is not None:
            size.binds.setdefault(name, value)
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
                except ValueError:
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
        if grid_expr in facts.host_assigns.get(launch.function, {}):
            grid_expr = facts.host_assigns[launch.function][grid_expr][1]
        genv = dict(env)
        if grid_expr.startswith("lambda"):
            arg = grid_expr[len("lambda"):grid_expr.index(":")].strip()
            genv[arg] = dict(size.binds)
            grid_expr = grid_expr.split(":", 1)[1]
        try:
            g = safe_eval(grid_expr, genv)
            g = g if isinstance(g, tuple) else (g,)
            size.programs = int(math.prod(int(x) for x in g))
        except (Unknown, TypeError, ValueError) as exc:
            if str(exc).isidentifier():
                size.unknown.add(str(exc))
    return size


def _bind(size: LaunchSize, env: dict, name: str, expr: str) -> None:
    try:
        value = safe_eval(expr, env)
    except Unknown:
        return
    if isinstance(value, (int, float, bool)) and not isinstance(value, str):
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
        for var, (_, expr) in sorted(kernel.assigns.items(), key=lambda kv: kv[1][0]):
            try:
                self.env[var] = self.of(ast.parse(expr.strip(), mode="eval").body)
            except SyntaxError:
                continue

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
            if name == "tl.dot" and len(args) >= 2:
                a, b = self.of(args[0]), self.of(args[1])
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


def body_cost(kernel: KernelFacts, binds: dict, elem_bytes: dict[str, int], default_bytes: int) -> BodyCost:
    """Per-program bytes and FLOPs, multiplied through enclosing loop trip counts."""
    cost = BodyCost()
    shapes = _Shapes(kernel)
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
        elif c.name == "tl.dot" and len(c.args) >= 2:
            a, b = shapes.parse(c.args[0]), shapes.parse(c.args[1])
            n = _elements((*a[:1], *b), binds) if a and b else None
            if n is None:
                cost.unsized.append(f"tl.dot at line {c.line}")
                continue
            cost.dot_flops += 2 * n * mult
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


@dataclass
class Analysis:
    kernel: str
    primary: Bottleneck
    others: list[Bottleneck]
    gpu: str
    numbers: dict[str, float]
    measured: bool = True  # False when the roofline verdict is a guess (no shapes, no profile)

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
) -> Analysis:
    dtype = DTYPE_ALIASES.get(dtype, dtype)
    overrides = resolve_overrides(kernel, {k: DTYPE_ALIASES.get(v, v) for k, v in (dtype_overrides or {}).items()})
    found: list[Bottleneck] = []
    nums: dict[str, float] = {}
    size = size_launch(facts, kernel, shapes)
    cost = body_cost(kernel, size.binds, {k: DTYPE_BYTES[v] for k, v in overrides.items()}, DTYPE_BYTES.get(dtype, 2))
    sized = size.programs is not None and (cost.bytes > 0 or cost.dot_flops > 0)

    subject = Subject(facts, kernel)
    numerics = evaluate(_NUMERICS, subject)
    if numerics.ok:
        found.append(Bottleneck(cls=BottleneckClass.numerics, rationale=[
            f"fp32 tl.dot at default precision (TF32 on NVIDIA) inside a loop at line {', '.join(map(str, numerics.lines))}: "
            "rounding of 2^-11 per product compounds over the chain"]))
    host = evaluate(_HOST, subject)
    if host.ok:
        found.append(Bottleneck(cls=BottleneckClass.host, rationale=[f"host code blocks or syncs: {'; '.join(host.reasons)}"]))
    in_loop_launch = [la for la in kernel.launches if la.loops]
    if in_loop_launch:
        found.append(Bottleneck(cls=BottleneckClass.launch, rationale=[
            f"launched from a Python loop (line {in_loop_launch[0].line}): one launch (~{hw.launch_overhead_us:.0f} µs of host and grid start) per iteration"]))

    if sized:
        programs = size.programs
        bytes_ = cost.bytes * programs
        dot_flops = cost.dot_flops * programs
        ew_flops = (cost.ew_flops + cost.transcendentals) * programs
        flops = dot_flops + ew_flops
        bw = hw.bandwidth_tbps * 1e12
        peak_dot = hw.peak(cost.dot_dtype if dot_flops else dtype) * 1e12
        peak_ew = hw.peak("float32") * 1e12
        t_mem = bytes_ / bw
        t_comp = dot_flops / peak_dot + ew_flops / peak_ew
        threads = size.num_warps * 32
        # registers: the largest tile (a dot's fp32 accumulator) lives across the loop with
        # operand tiles about half its size in 16 bits: ~1.5 tiles. Calibrated on Triton's
        # matmul tutorial, whose 128x256 tiles at 8 warps (~200 registers) do not spill.
        regs_2d = 3 * cost.largest_tile // (2 * max(threads, 1))
        # a 1-D block of N values spreads over 32*num_warps threads: N/threads registers per live tensor
        regs_1d = cost.tensors_1d * cost.block_1d // max(threads, 1)
        regs_per_thread = min(255, 32 + max(regs_2d, regs_1d))
        resident_by_regs = max(1, hw.regs_per_sm // (regs_per_thread * threads))
        resident = max(1, min(resident_by_regs, hw.max_threads_per_sm // threads, 32))
        slots = hw.sm_count * resident
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
        if regs_per_thread >= 255:
            what = (f"tiles of {cost.largest_tile} elements" if regs_2d >= regs_1d else
                    f"{cost.tensors_1d} 1-D block value(s) of {cost.block_1d} elements")
            verdicts.append(Bottleneck(cls=BottleneckClass.occupancy, numbers=nums, rationale=[
                f"{what} over {threads} threads need ~{32 + max(regs_2d, regs_1d)} registers/thread: spills to local memory"]))
        roof = Bottleneck(
            cls=BottleneckClass.memory if ai < ridge else BottleneckClass.compute, numbers=nums,
            rationale=[f"{_fmt_bytes(bytes_)} moved and {_fmt_flops(flops)} per launch: intensity {ai:.2f} FLOP/B "
                       f"{'<' if ai < ridge else '≥'} ridge {ridge:.0f} FLOP/B on {hw.name}; memory {t_mem * 1e6:.2f} µs vs compute {t_comp * 1e6:.2f} µs"],
        )
        verdicts.append(roof)
        found = verdicts + found
    else:
        missing = sorted(size.unknown)[:6]
        has_dot_loop = any(c.name == "tl.dot" and c.in_loop for c in kernel.calls)
        found.append(Bottleneck(
            cls=BottleneckClass.compute if has_dot_loop else BottleneckClass.memory,
            rationale=["not sized (pass --shape NAME=VALUE" + (f"; unknown: {', '.join(missing)}" if missing else "") + "): "
                       + ("tl.dot in a loop suggests a compute-bound tile loop" if has_dot_loop else "no tl.dot loop: assuming a streaming, memory-bound kernel")],
        ))
    for a in size.assumptions:
        found[0].rationale.append(a)
    primary, others = found[0], _dedupe(found[1:], found[0].cls)
    return Analysis(kernel=kernel.name, primary=primary, others=others, gpu=hw.name, numbers=nums, measured=sized)


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
