"""Replaying a launcher's arithmetic: shapes and input tensors as the user knows them.

A user knows their tensors (`--input x=4096x4096:bf16`), rarely the names a
launcher gives their extents. The launcher's own lines turn one into the other:
`M, K = a.shape`, `stride_am = a.stride(0)`, `grid = (triton.cdiv(M, BM),)`.
`safe_eval` replays them on a `Tensor` that has a shape, contiguous strides
and a dtype, and nothing else. It is arithmetic only (no `eval`, no attribute
or call outside a short allow-list) and bounded: exponents, integer sizes and
tuple lengths are capped, so `9 ** 9 ** 9` in a file is refused, not computed.
"""
from __future__ import annotations

import ast
import math
import re
from dataclasses import dataclass

MAX_EXPONENT = 128
MAX_INT_BITS = 256
MAX_DIMS = 16

DTYPE_BYTES = {"float32": 4, "fp32": 4, "float16": 2, "fp16": 2, "bfloat16": 2, "bf16": 2, "float8": 1, "fp8": 1,
               "float8_e4m3fn": 1, "float8_e5m2": 1, "int8": 1, "uint8": 1, "int16": 2, "int32": 4, "int64": 8,
               "float64": 8, "bool": 1}
DTYPE_ALIASES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16", "fp8": "float8", "half": "float16",
                 "float": "float32", "e4m3": "float8_e4m3fn", "e5m2": "float8_e5m2", "long": "int64"}


class Unknown(Exception):
    """An expression refers to something that cannot be sized; the message is the name when there is one."""


class InputError(ValueError):
    """A malformed --input; one line."""


@dataclass(frozen=True)
class Tensor:
    """What a launcher may ask of a tensor: its shape, contiguous strides, dtype."""

    shape: tuple[int, ...]
    dtype: str = "bfloat16"

    def numel(self) -> int:
        return math.prod(self.shape)

    def stride(self, dim: int | None = None):
        strides = tuple(math.prod(self.shape[i + 1:]) for i in range(len(self.shape)))
        return strides if dim is None else strides[dim]

    def size(self, dim: int | None = None):
        return self.shape if dim is None else self.shape[dim]

    def element_size(self) -> int:
        return DTYPE_BYTES.get(self.dtype, 2)

    def view(self, *shape) -> "Tensor":
        if len(shape) == 1 and isinstance(shape[0], tuple):
            shape = shape[0]
        shape = tuple(int(s) for s in shape)
        if shape.count(-1) == 1:
            known = math.prod(s for s in shape if s != -1)
            shape = tuple(self.numel() // max(known, 1) if s == -1 else s for s in shape)
        if math.prod(shape) != self.numel():
            raise Unknown("view")
        return Tensor(shape, self.dtype)

    def transpose(self, a: int, b: int) -> "Tensor":
        s = list(self.shape)
        s[a], s[b] = s[b], s[a]
        return Tensor(tuple(s), self.dtype)

    def unsqueeze(self, dim: int) -> "Tensor":
        s = list(self.shape)
        s.insert(dim if dim >= 0 else len(s) + 1 + dim, 1)
        return Tensor(tuple(s), self.dtype)


# method -> how it acts on a Tensor
_METHODS = {
    "numel": lambda t: t.numel(), "stride": lambda t, d=None: t.stride(d), "size": lambda t, d=None: t.size(d),
    "dim": lambda t: len(t.shape), "ndimension": lambda t: len(t.shape), "element_size": lambda t: t.element_size(),
    "view": Tensor.view, "reshape": Tensor.view, "contiguous": lambda t: t, "clone": lambda t: t,
    "flatten": lambda t: Tensor((t.numel(),), t.dtype), "is_contiguous": lambda t: True,
    "t": lambda t: t.transpose(0, 1), "transpose": Tensor.transpose, "unsqueeze": Tensor.unsqueeze,
    "float": lambda t: Tensor(t.shape, "float32"), "half": lambda t: Tensor(t.shape, "float16"),
    "bfloat16": lambda t: Tensor(t.shape, "bfloat16"), "to": lambda t, *a: Tensor(t.shape, next((x for x in a if isinstance(x, str)), t.dtype)),
    "new_empty": lambda t, shape, *a: Tensor(tuple(shape), t.dtype), "new_zeros": lambda t, shape, *a: Tensor(tuple(shape), t.dtype),
}
_ATTRS = {"shape": lambda t: t.shape, "ndim": lambda t: len(t.shape), "dtype": lambda t: t.dtype, "T": lambda t: Tensor(t.shape[::-1], t.dtype),
          "is_cuda": lambda t: True}


def _cdiv(a, b):
    return -(-a // b)


def _next_pow2(n):
    n = int(n)
    return 1 << (n - 1).bit_length() if n > 1 else 1


def _like(t, *args, **kw):
    if not isinstance(t, Tensor):
        raise Unknown("empty_like")
    return Tensor(t.shape, kw.get("dtype", t.dtype))


def _new(*shape, **kw):
    if len(shape) == 1 and isinstance(shape[0], tuple):
        shape = shape[0]
    if len(shape) > MAX_DIMS or not all(isinstance(s, int) for s in shape):
        raise Unknown("torch.empty")
    return Tensor(tuple(shape), kw.get("dtype", "float32"))


_FUNCS = {
    "cdiv": _cdiv, "triton.cdiv": _cdiv, "tl.cdiv": _cdiv, "ceil_div": _cdiv, "ceildiv": _cdiv, "div_up": _cdiv,
    "next_power_of_2": _next_pow2, "triton.next_power_of_2": _next_pow2,
    "min": min, "max": max, "int": int, "abs": abs, "float": float, "bool": bool, "len": lambda x: x.shape[0] if isinstance(x, Tensor) else len(x),
    "math.ceil": math.ceil, "math.floor": math.floor, "math.sqrt": math.sqrt, "math.log2": math.log2, "math.prod": math.prod,
    "torch.empty_like": _like, "torch.zeros_like": _like, "torch.ones_like": _like, "torch.full_like": _like,
    "torch.empty": _new, "torch.zeros": _new, "torch.ones": _new,
}
_KW_OK = {"torch.empty_like", "torch.zeros_like", "torch.ones_like", "torch.full_like", "torch.empty", "torch.zeros", "torch.ones"}


def dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = dotted(node.value)
        return f"{base}.{node.attr}" if base else ""
    return ""


def _checked(v):
    if isinstance(v, bool):
        return v
    if isinstance(v, int) and v.bit_length() > MAX_INT_BITS:
        raise Unknown("integer too large")
    if isinstance(v, float) and not math.isfinite(v):
        raise Unknown("not finite")
    if isinstance(v, tuple) and len(v) > MAX_DIMS:
        raise Unknown("tuple too long")
    return v


def _arith(op: ast.operator, a, b):
    if isinstance(op, ast.Add) and isinstance(a, tuple) and isinstance(b, tuple):
        return a + b
    if not all(isinstance(x, (int, float)) for x in (a, b)):
        raise Unknown("arithmetic on a non-number")
    if isinstance(op, ast.Pow):
        if abs(b) > MAX_EXPONENT or (isinstance(a, int) and abs(a) > 2**32 and b > 1):
            raise Unknown("exponent too large")
        return a**b
    if isinstance(op, ast.LShift):
        if not isinstance(b, int) or b > MAX_INT_BITS:
            raise Unknown("shift too large")
        return a << b
    fn = {ast.Add: lambda: a + b, ast.Sub: lambda: a - b, ast.Mult: lambda: a * b, ast.FloorDiv: lambda: a // b,
          ast.Div: lambda: a / b, ast.Mod: lambda: a % b, ast.RShift: lambda: a >> b,
          ast.BitAnd: lambda: a & b, ast.BitOr: lambda: a | b}.get(type(op))
    if fn is None:
        raise Unknown("operator")
    return fn()


def _dtype_of(name: str) -> str | None:
    """`torch.bfloat16`, `tl.float32` -> 'bfloat16', 'float32'."""
    head, _, attr = name.rpartition(".")
    if head in ("torch", "tl", "triton.language") and (attr in DTYPE_BYTES or attr in DTYPE_ALIASES):
        return DTYPE_ALIASES.get(attr, attr)
    return None


def safe_eval(expr: str | ast.AST, env: dict):
    """The value of a launcher expression over `env` (numbers, tuples, Tensors, dicts); Unknown if it cannot say."""

    def ev(n: ast.AST):
        if isinstance(n, ast.Expression):
            return ev(n.body)
        if isinstance(n, ast.Constant) and isinstance(n.value, (int, float, bool, str)) or (isinstance(n, ast.Constant) and n.value is None):
            if isinstance(n.value, str) and len(n.value) > 256:
                raise Unknown("string")
            return n.value
        if isinstance(n, ast.Name):
            if n.id in env:
                return env[n.id]
            raise Unknown(n.id)
        if isinstance(n, (ast.Tuple, ast.List)):
            out: list = []
            for e in n.elts:
                if isinstance(e, ast.Starred):
                    out += list(ev(e.value))
                else:
                    out.append(ev(e))
            return _checked(tuple(out))
        if isinstance(n, ast.BinOp):
            return _checked(_arith(n.op, ev(n.left), ev(n.right)))
        if isinstance(n, ast.UnaryOp):
            v = ev(n.operand)
            if isinstance(n.op, ast.USub) and isinstance(v, (int, float)):
                return -v
            if isinstance(n.op, ast.Not):
                return not v
            if isinstance(n.op, ast.UAdd):
                return v
            raise Unknown("operator")
        if isinstance(n, ast.BoolOp):
            vals = [ev(v) for v in n.values]
            return all(vals) if isinstance(n.op, ast.And) else next((v for v in vals if v), vals[-1])
        if isinstance(n, ast.Compare) and len(n.ops) == 1:
            a, b = ev(n.left), ev(n.comparators[0])
            ops = {ast.Lt: lambda: a < b, ast.LtE: lambda: a <= b, ast.Gt: lambda: a > b, ast.GtE: lambda: a >= b,
                   ast.Eq: lambda: a == b, ast.NotEq: lambda: a != b, ast.Is: lambda: a is b, ast.IsNot: lambda: a is not b}
            if type(n.ops[0]) in ops:
                return ops[type(n.ops[0])]()
            raise Unknown("comparison")
        if isinstance(n, ast.IfExp):
            return ev(n.body) if ev(n.test) else ev(n.orelse)
        if isinstance(n, ast.Call):
            return call(n)
        if isinstance(n, ast.Subscript):
            base = ev(n.value)
            if isinstance(n.slice, ast.Slice):
                lo, hi, st = (ev(x) if x is not None else None for x in (n.slice.lower, n.slice.upper, n.slice.step))
                if isinstance(base, tuple):
                    return base[lo:hi:st]
                raise Unknown("slice")
            key = ev(n.slice)
            if isinstance(base, dict) and key not in base:
                raise Unknown(key if isinstance(key, str) and key.isidentifier() else "<key>")  # META['BLOCK']: a name to give
            if isinstance(base, (dict, tuple)):
                return base[key]
            raise Unknown(dotted(n.value) or "subscript")
        if isinstance(n, ast.Attribute):
            name = dotted(n)
            if name in env:
                return env[name]
            dt = _dtype_of(name)
            if dt:
                return dt
            base = ev(n.value)
            if isinstance(base, Tensor) and n.attr in _ATTRS:
                return _ATTRS[n.attr](base)
            raise Unknown(name or n.attr)
        raise Unknown(f"<{type(n).__name__.lower()}>")  # not a name the user could give

    def call(n: ast.Call):
        name = dotted(n.func)
        if isinstance(n.func, ast.Attribute) and name not in _FUNCS and n.func.attr in _METHODS:
            base = ev(n.func.value)
            if isinstance(base, Tensor):
                return _checked(_METHODS[n.func.attr](base, *[ev(a) for a in n.args]))
            raise Unknown(dotted(n.func.value) or "method")
        if name in _FUNCS and (not n.keywords or name in _KW_OK):
            args = []
            for a in n.args:
                args += list(ev(a.value)) if isinstance(a, ast.Starred) else [ev(a)]
            kw = {}
            for k in n.keywords:
                if k.arg == "dtype":
                    try:
                        kw["dtype"] = ev(k.value)
                    except Unknown:
                        pass
            return _checked(_FUNCS[name](*args, **kw))
        raise Unknown(name or "call")

    try:
        tree = expr if isinstance(expr, ast.AST) else ast.parse(expr.strip(), mode="eval")
        return ev(tree)
    except (SyntaxError, KeyError, IndexError, TypeError, ZeroDivisionError, ValueError, OverflowError, RecursionError, AttributeError):
        raise Unknown(expr if isinstance(expr, str) else "expression") from None


_BUILTINS = set(_FUNCS) | {"range", "list", "tuple", "dict", "sum", "print", "isinstance", "getattr", "hasattr", "str", "torch", "triton", "tl", "math", "True", "False", "None", "self"}


def free_names(expr: str, env: dict) -> list[str]:
    """Names an expression reads that `env` lacks (comprehension targets and called functions excluded)."""
    try:
        tree = ast.parse(expr.strip(), mode="eval")
    except SyntaxError:
        return []
    bound: set[str] = set()
    called: set[str] = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.comprehension):
            bound |= {t.id for t in ast.walk(n.target) if isinstance(t, ast.Name)}
        elif isinstance(n, ast.Lambda):
            bound |= {a.arg for a in n.args.args}
        elif isinstance(n, ast.Call):
            called.add(dotted(n.func).split(".")[0])
    out = []
    for n in ast.walk(tree):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id not in env and n.id not in bound and n.id not in called and n.id not in _BUILTINS:
            out.append(n.id)
    return list(dict.fromkeys(out))


# --------------------------------------------------------------------------------------
# --input NAME=DIMSxDIMS[:DTYPE]
# --------------------------------------------------------------------------------------

_INPUT = re.compile(r"^([A-Za-z_][\w.]*)=(\d+(?:[x×,]\d+)*)(?::(\w+))?$")


def parse_input(item: str) -> tuple[str, Tensor]:
    """'x=4096x4096:bf16' -> ('x', Tensor((4096, 4096), 'bfloat16'))."""
    m = _INPUT.match(item.strip())
    if not m:
        raise InputError(f"--input: expected NAME=D0xD1...[:DTYPE] (e.g. x=4096x4096:bf16), got '{item}'")
    dims = tuple(int(d) for d in re.split(r"[x×,]", m.group(2)))
    if len(dims) > MAX_DIMS or any(d <= 0 or d.bit_length() > 48 for d in dims):
        raise InputError(f"--input: {m.group(1)}: dimensions must be positive and at most {MAX_DIMS} of them")
    dtype = DTYPE_ALIASES.get(m.group(3) or "bf16", m.group(3) or "bf16")
    if dtype not in DTYPE_BYTES:
        raise InputError(f"--input: {m.group(1)}: unknown dtype '{m.group(3)}' (known: {', '.join(sorted(set(DTYPE_BYTES) | set(DTYPE_ALIASES)))})")
    return m.group(1), Tensor(dims, dtype)


def parse_inputs(items: list[str]) -> dict[str, Tensor]:
    return dict(parse_input(i) for i in items)
