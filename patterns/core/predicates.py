"""The one predicate library over kernel facts.

A pattern's `present_when` and `applies_when.conditions` name predicates from
here with keyword arguments; pattern.yaml never contains code. Each predicate
returns a Verdict: whether it holds, on which lines, and a short reason that
`patterns suggest` shows as "why it applies".
"""
from __future__ import annotations

import ast
import inspect
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable, Literal

from pydantic import ConfigDict, ValidationError, create_model

from patterns.core.facts_types import NATIVE_KINDS, CallSite, FileFacts, KernelFacts
from patterns.core.schema import Condition, Verdict


@dataclass(frozen=True)
class Subject:
    """What a condition is evaluated on: one kernel of a file, or the file alone."""

    file: FileFacts
    kernel: KernelFacts | None = None


@dataclass(frozen=True)
class PredicateSpec:
    name: str
    func: Callable[..., Verdict]
    args_model: type
    doc: str
    scope: Literal["kernel", "file"]


PREDICATES: dict[str, PredicateSpec] = {}


def predicate(scope: Literal["kernel", "file"] = "kernel"):
    """Register a predicate; its keyword-only parameters are its YAML arguments."""

    def wrap(func: Callable[..., Verdict]) -> Callable[..., Verdict]:
        fields = {}
        for p in inspect.signature(func).parameters.values():
            if p.kind is inspect.Parameter.KEYWORD_ONLY:
                default = ... if p.default is inspect.Parameter.empty else p.default
                fields[p.name] = (p.annotation, default)
        # built on first use: only validating a pattern's conditions needs it
        model = create_model(f"{func.__name__}_args", __config__=ConfigDict(extra="forbid", defer_build=True), **fields)
        doc = inspect.getdoc(func) or ""
        PREDICATES[func.__name__] = PredicateSpec(func.__name__, func, model, doc.splitlines()[0] if doc else "", scope)
        return func

    return wrap


def validate_call(name: str, args: dict) -> dict:
    """Check a predicate name and its arguments; return the normalised arguments."""
    spec = PREDICATES.get(name)
    if spec is None:
        close = [n for n in PREDICATES if n.split("_")[0] == name.split("_")[0]]
        hint = f" (did you mean {', '.join(sorted(close))}?)" if close else ""
        raise ValueError(f"unknown predicate '{name}'{hint}")
    try:
        parsed = spec.args_model(**args)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(x) for x in err["loc"])
        raise ValueError(f"predicate '{name}': argument '{where}': {err['msg']}") from None
    return {k: v for k, v in parsed.model_dump().items() if k in args}


def evaluate(cond: Condition, subject: Subject) -> Verdict:
    if cond.op == "pred":
        spec = PREDICATES[cond.predicate]
        if spec.scope == "kernel" and subject.kernel is None:
            return Verdict(ok=False, reasons=[f"{cond.predicate}: no kernel"])
        return spec.func(subject, **cond.args)
    if cond.op == "not":
        inner = evaluate(cond.children[0], subject)
        # the inner predicate's own failure reason reads best ("no @triton.autotune")
        reasons = inner.reasons if not inner.ok and inner.reasons else [f"not {cond.children[0].describe()}"]
        return Verdict(ok=not inner.ok, reasons=reasons)
    results = [evaluate(c, subject) for c in cond.children]
    ok = all(r.ok for r in results) if cond.op == "all" else any(r.ok for r in results)
    held = [r for r in results if r.ok]
    return Verdict(
        ok=ok,
        lines=sorted({ln for r in held for ln in r.lines}),
        reasons=[reason for r in held for reason in r.reasons],
    )


# --------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------


def _unquote(v: str) -> str:
    return v.strip().strip("'\"")


def _code(c: CallSite, width: int = 60) -> str:
    """The call as written (arguments and keywords), on one line: what a reader finds at its line."""
    args = ", ".join([*c.args, *(f"{k}={v}" for k, v in c.kwargs.items())])
    text = re.sub(r"\s+", " ", f"{c.name}({args})")
    return text if len(text) <= width else text[: width - 2] + "…)"


def _hit(calls: list[CallSite], what: str, min_count: int = 1) -> Verdict:
    """A verdict over matched calls; its reason quotes the first matched call and its line, never a pattern."""
    if len(calls) >= min_count:
        lines = sorted({c.line for c in calls})
        first = min(calls, key=lambda c: c.line)
        more = f", {len(lines) - 1} more line{'s' if len(lines) > 2 else ''}" if len(lines) > 1 else ""
        return Verdict(ok=True, lines=lines, reasons=[f"{what}: `{_code(first)}` (line {first.line}{more})"])
    return Verdict(ok=False, reasons=[f"no {what}" if not calls else f"only {len(calls)}× {what}, need {min_count}"])


def readable(patterns: list[str]) -> str:
    """Regular expressions of a condition as a reader would say them: `(.*\\.)?(exp|exp2)` -> exp/exp2."""
    return _readable(tuple(patterns))


@lru_cache(maxsize=4096)
def _readable(patterns: tuple[str, ...]) -> str:
    out: list[str] = []
    for p in patterns:
        p = p.replace("(?i)", "")
        p = re.sub(r"\((?:[^()]|\([^()]*\))*\)\?", "", p)  # optional groups: (.*\.)?, (math\.)?
        p = re.sub(r"\\?.\?", "", p)  # an optional character: _?welford
        p = re.sub(r"\.\*$", "\0", p)  # tl\.math\..* -> tl.math.* (the star put back below)
        p = re.sub(r"\.\*|\\w\*|\\w\+|\^|\$|\\b", "", p)
        m = re.fullmatch(r"(.*?)\(([^()]*)\)(.*)", p)
        alts = [m.group(1) + a + m.group(3) for a in m.group(2).split("|")] if m else [p]
        out += [re.sub(r"\\(.)", r"\1", a).replace("\0", "*") for a in alts]
    return "/".join(dict.fromkeys(a for a in out if a)) or "/".join(patterns)


# tl.dot_scaled (microscaled fp8/fp4 operands) is a tl.dot for every condition that asks for one
_SPELLINGS = {"tl.dot_scaled": ("tl.dot_scaled", "tl.dot")}


def _names(c: CallSite) -> tuple[str, ...]:
    """The names a call answers to: its own, and tl.dot for tl.dot_scaled."""
    return _SPELLINGS.get(c.name, (c.name,))


def _called(c: CallSite, names) -> bool:
    return any(n in names for n in _names(c))


def _call_matches(c: CallSite, patterns: list[str]) -> bool:
    return any(_matches_any(n, patterns) for n in _names(c))


@lru_cache(maxsize=65536)
def _rx(pattern: str, flags: int = 0) -> re.Pattern:
    """re.compile, remembered: patterns built from a kernel's names outgrow re's own cache of 512."""
    return re.compile(pattern, flags)


def _kernel(s: Subject) -> KernelFacts:
    assert s.kernel is not None
    return s.kernel


def _matches_any(value: str, patterns: list[str]) -> bool:
    return _combined(tuple(patterns)).fullmatch(value) is not None


@lru_cache(maxsize=None)
def _combined(patterns: tuple[str, ...]) -> re.Pattern:
    """One alternation for a list of patterns: a single regex pass per value (a leading (?i) kept scoped)."""
    parts = [f"(?i:{p[4:]})" if p.startswith("(?i)") else f"(?:{p})" for p in patterns]
    try:
        return re.compile("|".join(parts))
    except re.error:  # a pattern with flags elsewhere: match them one by one
        compiled = _compiled(patterns)

        class _Any:
            @staticmethod
            def fullmatch(value: str):
                return next((m for p in compiled if (m := p.fullmatch(value))), None)

        return _Any()  # type: ignore[return-value]


@lru_cache(maxsize=None)
def _compiled(patterns: tuple[str, ...]) -> tuple[re.Pattern, ...]:
    # conditions run over every kernel of the library (generality): skip re's per-call cache lookup
    return tuple(map(re.compile, patterns))


# --------------------------------------------------------------------------------------
# generic call predicates
# --------------------------------------------------------------------------------------


@predicate()
def calls(
    s: Subject,
    *,
    name: list[str],
    kwarg: str | None = None,
    kwarg_values: list[str] | None = None,
    without_kwarg: list[str] | None = None,
    in_loop: bool | None = None,
    independent_of_pid_axis: int | None = None,
    depends_on_pid_axis: int | None = None,
    shared_between_programs: bool | None = None,
    min_count: int = 1,
) -> Verdict:
    """Kernel calls one of `name` (e.g. tl.atomic_add), optionally with a keyword and value, inside or outside a loop.

    `shared_between_programs`: the arguments miss at least one of the program axes the kernel reads (the
    fast part of a folded axis counts as its own), so programs along it read the same data."""
    hits = []
    k = _kernel(s)
    axes = set().union(*k.pid_deps.values(), *(c.pid_axes for c in k.calls)) if shared_between_programs is not None else set()
    for c in k.calls:
        if not _called(c, name):
            continue
        if kwarg is not None:
            if kwarg not in c.kwargs:
                continue
            if kwarg_values is not None and _unquote(c.kwargs[kwarg]) not in kwarg_values:
                continue
        if without_kwarg and any(k in c.kwargs for k in without_kwarg):
            continue
        if in_loop is not None and c.in_loop != in_loop:
            continue
        if independent_of_pid_axis is not None and independent_of_pid_axis in c.pid_axes:
            continue
        if depends_on_pid_axis is not None and depends_on_pid_axis not in c.pid_axes:
            continue
        if shared_between_programs is not None and (not axes <= set(c.pid_axes)) != shared_between_programs:
            continue
        hits.append(c)
    desc = "/".join(name)
    if kwarg:
        desc += f"({kwarg}" + (f"∈{kwarg_values}" if kwarg_values else "") + ")"
    if in_loop is not None:
        desc += " in a loop" if in_loop else " outside loops"
    if independent_of_pid_axis is not None:
        desc += f" independent of program_id({independent_of_pid_axis})"
    if shared_between_programs is not None:
        desc += " shared between programs" if shared_between_programs else " read by one program"
    return _hit(hits, desc, min_count)


@predicate()
def dot(
    s: Subject,
    *,
    precision: list[Literal["default", "tf32", "tf32x3", "ieee", "bf16x3", "bf16x6", "explicit"]] | None = None,
    operand_dtype: list[str] | None = None,
    in_loop: bool | None = None,
    min_count: int = 1,
) -> Verdict:
    """tl.dot (or tl.dot_scaled) calls at a given input precision ("default" = TF32 on NVIDIA for fp32), operand dtype or loop position."""
    hits = []
    for c in _kernel(s).calls_named("tl.dot", "tl.dot_scaled"):
        prec = "default"
        if c.name == "tl.dot_scaled":
            prec = "scaled"  # microscaled operands: no TF32 question, matched only when no precision is asked
        elif "input_precision" in c.kwargs:
            raw = c.kwargs["input_precision"]
            # a module constant such as tl.constexpr('ieee' if IS_NPU else 'tf32x3')
            # counts as the NVIDIA branch's value, the last quoted literal
            text = s.file.constants.get(raw, raw)
            literals = re.findall(r"['\"](\w+)['\"]", text)
            prec = literals[-1] if literals else "explicit"
        elif c.kwargs.get("allow_tf32") == "False":
            prec = "ieee"
        elif c.kwargs.get("allow_tf32") == "True":
            prec = "tf32"
        if precision is not None and prec not in precision:
            continue
        if operand_dtype is not None:
            known = [d for d in c.operand_dtypes if d]
            # unknown operand dtypes count as a match only for fp32 queries on
            # un-cast loads, which is how fp32 state chains usually read
            if known and not all(d in operand_dtype for d in known):
                continue
            if not known and "unknown" not in operand_dtype:
                continue
        if in_loop is not None and c.in_loop != in_loop:
            continue
        hits.append(c)
    desc = "tl.dot"
    if precision:
        desc += f" at precision {'/'.join(precision)}"
    if operand_dtype:
        desc += f" on {'/'.join(operand_dtype)} operands"
    if in_loop:
        desc += " in a loop"
    return _hit(hits, desc, min_count)


@predicate()
def reduction(s: Subject, *, ops: list[str] = ["tl.sum", "tl.max", "tl.min", "tl.reduce", "tl.argmax", "tl.argmin"], in_loop: bool | None = None, min_count: int = 1) -> Verdict:  # noqa: B006
    """Kernel reduces a block (tl.sum, tl.max, tl.reduce, ...)."""
    hits = [c for c in _kernel(s).calls if c.name in ops and (in_loop is None or c.in_loop == in_loop)]
    return _hit(hits, "reduction " + "/".join(sorted({c.name for c in hits}) or ops[:2]), min_count)


@predicate()
def atomics(s: Subject, *, min_count: int = 1) -> Verdict:
    """Kernel uses atomic read-modify-write (tl.atomic_add, tl.atomic_max, ...)."""
    return _hit([c for c in _kernel(s).calls if c.name.startswith("tl.atomic_")], "atomic update", min_count)


@predicate()
def memory_access(
    s: Subject,
    *,
    op: Literal["load", "store", "any"] = "any",
    via: Literal["pointer", "block_ptr", "tensor_descriptor", "any"] = "any",
    cache_hint: bool | None = None,
    in_loop: bool | None = None,
    min_count: int = 1,
) -> Verdict:
    """Loads/stores by raw pointer, block pointer or tensor descriptor, with or without cache/eviction hints."""
    hits = []
    for c in _kernel(s).calls:
        kind = ""
        if c.name in ("tl.load", "tl.store"):
            kind = c.name[3:]
            origin = c.first_arg_origin
            how = "block_ptr" if origin in ("tl.make_block_ptr", "tl.advance") else "pointer"
        elif c.receiver.endswith("make_tensor_descriptor") or c.receiver.endswith("TensorDescriptor"):
            kind = c.name.rsplit(".", 1)[-1]
            how = "tensor_descriptor"
        elif c.name in ("tl._experimental_descriptor_load", "tl._experimental_descriptor_store"):
            kind, how = c.name.rsplit("_", 1)[-1], "tensor_descriptor"
        if kind not in ("load", "store"):
            continue
        if op != "any" and kind != op:
            continue
        if via != "any" and how != via:
            continue
        hinted = "cache_modifier" in c.kwargs or "eviction_policy" in c.kwargs
        if cache_hint is not None and hinted != cache_hint:
            continue
        if in_loop is not None and c.in_loop != in_loop:
            continue
        hits.append(c)
    desc = f"{op if op != 'any' else 'load/store'} via {via}"
    if cache_hint is not None:
        desc += " with cache hint" if cache_hint else " without cache hint"
    if in_loop is not None:
        desc += " in a loop" if in_loop else ""
    return _hit(hits, desc, min_count)


# --------------------------------------------------------------------------------------
# structure: loops, program ids, parameters, decorators, launches
# --------------------------------------------------------------------------------------


@predicate()
def loop(
    s: Subject,
    *,
    kind: list[str] | None = None,
    contains: list[str] | None = None,
    num_stages_set: bool | None = None,
    bound_param: list[str] | None = None,
    min_count: int = 1,
) -> Verdict:
    """Kernel has a loop (range / tl.range / tl.static_range / while) containing given calls, with or without num_stages."""
    k = _kernel(s)
    hits = []
    for lp in k.loops:
        if kind is not None and lp.kind not in kind:
            continue
        if num_stages_set is not None and (lp.num_stages is not None or "num_stages" in lp.kwargs) != num_stages_set:
            continue
        if bound_param is not None and not any(re.search(rf"\b{re.escape(p)}\b", lp.iter) for p in bound_param):
            continue
        if contains is not None:
            inside = {n for c in k.calls if lp.line in c.loops for n in _names(c)}
            if not all(name in inside for name in contains):
                continue
        hits.append(lp)
    desc = "loop" + (f" ({'/'.join(kind)})" if kind else "")
    if contains:
        desc += f" containing {', '.join(contains)}"
    if num_stages_set is not None:
        desc += " with num_stages" if num_stages_set else " without num_stages"
    if len(hits) >= min_count:
        return Verdict(ok=True, lines=[lp.line for lp in hits], reasons=[f"{desc} (line {', '.join(str(lp.line) for lp in hits[:6])})"])
    return Verdict(ok=False, reasons=[f"no {desc}"])


@predicate()
def program_ids(s: Subject, *, min_axes: int = 1, max_axes: int = 3) -> Verdict:
    """Kernel's grid uses between min_axes and max_axes program_id axes."""
    k = _kernel(s)
    axes = set()
    for c in k.calls_named("tl.program_id"):
        a = c.args[0] if c.args else c.kwargs.get("axis", "0")
        axes.add(a)
    ok = min_axes <= len(axes) <= max_axes
    lines = [c.line for c in k.calls_named("tl.program_id")]
    return Verdict(ok=ok, lines=lines if ok else [], reasons=[f"{len(axes)} program_id axes"])


@lru_cache(maxsize=None)
def _scaled_by(block: str) -> re.Pattern:
    """`v * BLOCK` or `BLOCK * v`, capturing v."""
    b = re.escape(block)
    return re.compile(rf"\b(\w+)\s*\*\s*{b}\b|\b{b}\s*\*\s*(\w+)\b")


def _tile_indices(k: KernelFacts, blocks: list[str]) -> dict[str, int]:
    """Variables v with `v * BLOCK` in an assignment or call: tile indices -> line."""
    found: dict[str, int] = {}
    texts = [(line, expr) for line, expr in k.assigns.values()]
    texts += [(c.line, a) for c in k.calls for a in [*c.args, *c.kwargs.values()]]
    for line, text in texts:
        for b in blocks:
            for m in _scaled_by(b).finditer(text):
                v = m.group(1) or m.group(2)
                if v in k.pid_deps:  # only indices that come from the grid
                    found.setdefault(v, line)
    return found


@predicate()
def tiles_axis_by_program(s: Subject, *, block_param: list[str]) -> Verdict:
    """A program_id-derived index is scaled by a block constexpr (e.g. `i_v * BV`): programs split the op along that axis."""
    k = _kernel(s)
    blocks = [p for p in k.constexprs if _matches_any(p, block_param)]
    if not blocks:
        return Verdict(ok=False, reasons=[f"no block constexpr matching {block_param}"])
    idx = _tile_indices(k, blocks)
    if idx:
        lines = sorted(set(idx.values()))
        return Verdict(ok=True, lines=lines, reasons=[f"programs tile {'/'.join(blocks)} by {', '.join(idx)} (line {', '.join(map(str, lines))})"])
    return Verdict(ok=False, reasons=[f"no program_id index scaled by {'/'.join(blocks)}"])


@predicate()
def repeated_per_tile(s: Subject, *, block_param: list[str], ops: list[str], min_count: int = 1) -> Verdict:
    """Calls to `ops` that do not depend on the tile index of `block_param`: every tile program recomputes them."""
    k = _kernel(s)
    blocks = [p for p in k.constexprs if _matches_any(p, block_param)]
    idx = _tile_indices(k, blocks)
    if not idx:
        return Verdict(ok=False, reasons=[f"no program tiles along {block_param}"])
    hits = [c for c in k.calls if c.name in ops and not (set(c.depends_on) & set(idx))]
    names = "/".join(sorted({c.name for c in hits})) or "/".join(ops)
    return _hit(hits, f"{names} recomputed identically by every {'/'.join(idx)} tile", min_count)


@predicate()
def constexpr_param(s: Subject, *, names: list[str]) -> Verdict:
    """Kernel has a tl.constexpr parameter whose name matches one of `names` (regular expressions)."""
    k = _kernel(s)
    hits = [p.name for p in k.params if p.constexpr and _matches_any(p.name, names)]
    return Verdict(ok=bool(hits), lines=[k.line] if hits else [], reasons=[f"constexpr {', '.join(hits)}" if hits else f"no constexpr matching {names}"])


@predicate()
def param(s: Subject, *, names: list[str]) -> Verdict:
    """Kernel has a parameter (any kind) whose name matches one of `names` (regular expressions)."""
    k = _kernel(s)
    hits = [p.name for p in k.params if _matches_any(p.name, names)]
    return Verdict(ok=bool(hits), lines=[k.line] if hits else [], reasons=[f"parameter {', '.join(hits)}" if hits else f"no parameter matching {names}"])


@predicate()
def autotuned(s: Subject, *, min_configs: int = 1, keyed: bool | None = None) -> Verdict:
    """Kernel has @triton.autotune with at least min_configs configs (and a non-empty key when keyed)."""
    at = _kernel(s).autotune
    if at is None:
        return Verdict(ok=False, reasons=["no @triton.autotune"])
    n = len(at.configs)
    if not at.generated and n < min_configs:
        return Verdict(ok=False, reasons=[f"@triton.autotune with {n} configs"])
    if keyed is not None and bool(at.key) != keyed:
        return Verdict(ok=False, reasons=["autotune key " + ("empty" if not at.key else "set")])
    return Verdict(ok=True, lines=[at.line], reasons=[f"@triton.autotune with {'generated' if at.generated else n} configs, key={at.key} (line {at.line})"])


@predicate()
def heuristics(s: Subject, *, names: list[str] | None = None, values: list[str] | None = None) -> Verdict:
    """Kernel has @triton.heuristics (deriving the given constexprs, regular expressions; `values`: whose derivation contains a match, e.g. `is not None`)."""
    k = _kernel(s)
    keys = [h for h, text in k.heuristics.items() if (names is None or _matches_any(h, names))
            and (values is None or any(p.search(text) for p in _compiled(tuple(values))))]
    return Verdict(ok=bool(keys), lines=[k.line] if keys else [], reasons=[f"@triton.heuristics for {', '.join(keys)}" if keys else "no matching @triton.heuristics"])


@predicate()
def jit_option(s: Subject, *, name: str) -> Verdict:
    """@triton.jit is given a keyword (e.g. do_not_specialize)."""
    k = _kernel(s)
    ok = name in k.jit_kwargs
    return Verdict(ok=ok, lines=[k.line] if ok else [], reasons=[f"@triton.jit({name}=…)" if ok else f"no @triton.jit({name}=…)"])


@predicate()
def launch(
    s: Subject,
    *,
    grid_dims: int | None = None,
    grid_mentions: list[str] | None = None,
    kwargs: list[str] | None = None,
    without_kwargs: list[str] | None = None,
    in_loop: bool | None = None,
) -> Verdict:
    """The kernel's launch: grid rank, names the grid mentions (regex), launch keywords present or absent."""
    k = _kernel(s)
    hits = []
    for la in k.launches:
        if grid_dims is not None and la.grid_dims != grid_dims:
            continue
        if grid_mentions is not None:
            local = s.file.host_assigns.get(la.function, {}).get(la.grid.strip())  # grid = (n, L); k[grid](...)
            grid = la.grid + (" " + local[1] if local else "")
            if not any(re.search(p, grid) for p in grid_mentions):
                continue
        if kwargs is not None and not all(x in la.kwargs for x in kwargs):
            continue
        if without_kwargs is not None and any(x in la.kwargs for x in without_kwargs):
            continue
        if in_loop is not None and bool(la.loops) != in_loop:
            continue
        hits.append(la)
    if hits:
        return Verdict(ok=True, lines=[la.line for la in hits], reasons=[f"launch grid {hits[0].grid} (line {hits[0].line})"])
    return Verdict(ok=False, reasons=["no matching launch" if k.launches else "no launch of this kernel in the file"])


# --------------------------------------------------------------------------------------
# host side (file scope)
# --------------------------------------------------------------------------------------


@predicate(scope="file")
def host_calls(s: Subject, *, name: list[str], kwarg: str | None = None, kwarg_values: list[str] | None = None, min_count: int = 1) -> Verdict:
    """Host (non-kernel) code calls one of `name` (regular expressions over normalised dotted names)."""
    hits = []
    for c in s.file.host_calls:
        if not _matches_any(c.name, name):
            continue
        if kwarg is not None and (kwarg not in c.kwargs or (kwarg_values is not None and _unquote(c.kwargs[kwarg]) not in kwarg_values)):
            continue
        hits.append(c)
    return _hit(hits, f"host call {'/'.join(sorted({c.name for c in hits})) or readable(name)}", min_count)


@predicate()
def launch_host_calls(s: Subject, *, name: list[str], min_count: int = 1) -> Verdict:
    """The host function that launches this kernel calls one of `name` before the launch or in a loop
    around it: the call delays or feeds this launch (a sync elsewhere in the file delays other kernels)."""
    k = _kernel(s)
    hits = []
    for la in k.launches:
        for c in s.file.host_calls:
            if c.function != la.function or not _matches_any(c.name, name):
                continue
            if c.line < la.line or set(c.loops) & set(la.loops):
                hits.append(c)
    hits = list({c.line: c for c in hits}.values())
    if len(hits) >= min_count:
        return _hit(hits, f"launcher calls {'/'.join(sorted({c.name.lstrip('.') for c in hits}))} before the launch", min_count)
    return Verdict(ok=False, reasons=[f"no {readable(name)} in the launcher before this kernel's launch"])


@predicate(scope="file")
def file_imports(s: Subject, *, modules: list[str]) -> Verdict:
    """The file imports one of `modules` (regular expressions over full module paths)."""
    hits = [m for m in s.file.imports.values() if _matches_any(m, modules)]
    return Verdict(ok=bool(hits), reasons=[f"imports {', '.join(sorted(set(hits)))}" if hits else f"no import of {modules}"])


@predicate(scope="file")
def has_kernel(s: Subject) -> Verdict:
    """The file defines at least one @triton.jit kernel."""
    n = len(s.file.kernels)
    return Verdict(ok=n > 0, reasons=[f"{n} Triton kernels"])


@predicate()
def pid_loop(
    s: Subject,
    *,
    start_from_pid: bool = False,
    contains_any: list[str] | None = None,
    contains_none: list[str] | None = None,
    kind: list[str] | None = None,
    min_count: int = 1,
) -> Verdict:
    """Loop whose range depends on program_id (start_from_pid: its start does, as in split-K ranges and persistent tile loops)."""
    k = _kernel(s)
    hits = []
    for lp in k.loops:
        if kind is not None and lp.kind not in kind:
            continue
        if start_from_pid:
            if not lp.start_pid_axes:
                continue
        elif not k.pid_deps.get(lp.target) and "program_id" not in lp.iter:
            continue
        inside = {n for c in k.calls if lp.line in c.loops for n in _names(c)}
        if contains_any is not None and not inside & set(contains_any):
            continue
        if contains_none is not None and inside & set(contains_none):
            continue
        hits.append(lp)
    desc = "loop " + ("starting at a program_id-dependent index" if start_from_pid else "over a program_id-dependent range")
    if contains_any:
        desc += f" containing {'/'.join(contains_any)}"
    if contains_none:
        desc += f" without {'/'.join(contains_none)}"
    if len(hits) >= min_count:
        return Verdict(ok=True, lines=[lp.line for lp in hits], reasons=[f"{desc} (line {', '.join(str(lp.line) for lp in hits[:6])})"])
    return Verdict(ok=False, reasons=[f"no {desc}"])


@predicate()
def loop_invariant_calls(s: Subject, *, ops: list[str] = ["tl.load"], min_count: int = 1) -> Verdict:  # noqa: B006
    """Calls to `ops` inside a loop whose arguments derive from nothing the loop (re)assigns: they repeat identically every iteration."""
    k = _kernel(s)
    by_line = {lp.line: lp for lp in k.loops}
    hits = []
    for c in k.calls:
        if c.name not in ops or not c.loops or c.via:
            continue  # calls inlined from a helper depend on its parameters, not the caller's loop
        inner = by_line.get(c.loops[-1])
        if inner is None or inner.kind == "tl.static_range":
            continue  # unrolled at compile time: each copy is its own straight-line code
        if not set(c.depends_on) & set(inner.assigned):
            hits.append(c)
    return _hit(hits, f"loop-invariant {'/'.join(sorted({c.name for c in hits}) or ops)} inside a loop", min_count)


@predicate(scope="file")
def file_calls(s: Subject, *, name: list[str], min_count: int = 1) -> Verdict:
    """Host code calls one of `name` in a function or at module level (regular expressions), e.g. a ctypes.PyDLL handle made at import."""
    hits = [c for c in [*s.file.host_calls, *s.file.module_calls] if _matches_any(c.name, name)]
    return _hit(hits, f"call {'/'.join(sorted({c.name for c in hits})) or readable(name)}", min_count)


@predicate()
def loop_bound_loaded(s: Subject, *, min_count: int = 1) -> Verdict:
    """A loop's range derives from values the kernel loads (per-program extents read on the device, not passed from the host)."""
    k = _kernel(s)
    loaded = set(k.loaded)
    hits = [c for c in k.calls if c.name in ("range", "tl.range") and not c.via and set(c.depends_on) & loaded]
    return _hit(hits, "loop bound loaded from memory", min_count)


def _autotune_wrappers(s: Subject, k: KernelFacts) -> list[tuple[str, str]]:
    """Module-level `name = triton.autotune(...)(kernel)` assignments, through other wrappers of the
    kernel (`_mm = triton.heuristics(H)(_mm_kernel)` then `tuned = triton.autotune(...)(_mm)`)."""
    names, out, grew = {k.name}, [], True
    while grew:
        grew = False
        for var, text in s.file.constants.items():
            if var in names or not any(n in text for n in names):
                continue
            m = re.search(r"\)\s*\(\s*([A-Za-z_]\w*)\s*[,)]\s*$", text.strip(), re.S)
            if m and m.group(1) in names:
                names.add(var)
                grew = True
                if "autotun" in text and re.search(r"autotun\w*\s*\(", text):
                    out.append((var, text))
    return out


def _config_values(s: Subject, source: str, name: str) -> list[str]:
    """Values of option `name` in autotune configs built by code: a comprehension
    (`Config(..., num_stages=s) for s in [2, 3, 4]`) or a helper function of the file returning them."""
    out = re.findall(rf"\b{name}\s*=\s*(\d+)", source)
    for var in re.findall(rf"\b{name}\s*=\s*([A-Za-z_]\w*)", source):
        m = re.search(rf"for\s+{var}\s+in\s+[\[(]([\d,\s]+)[\])]", source)
        out += re.findall(r"\d+", m.group(1)) if m else []
    # configs returned by helpers of the file: `get_configs()`, `get_a() + get_b()`
    for helper in re.findall(r"([A-Za-z_][\w.]*)\s*\(\s*\)", source):
        fn = helper.rsplit(".", 1)[-1]
        for c in s.file.host_calls:
            if c.function == fn and c.name.endswith("Config") and name in c.kwargs:
                out += _config_values(s, f"{name}={c.kwargs[name]}", name) or [c.kwargs[name]]
    return out


@predicate()
def launch_option(s: Subject, *, name: str, min_value: int | None = None, max_value: int | None = None) -> Verdict:
    """A launch keyword or autotune config option (num_stages, num_warps, ...) is an integer in [min_value, max_value].

    Configs built by a comprehension or a helper of the file are read; a launch keyword the launcher
    computes (`num_stages=config.num_stages`, a per-shape table) counts as chosen, whatever its value."""
    k = _kernel(s)
    found: list[tuple[int, int]] = []
    chosen: list[tuple[int, str]] = []
    texts = []
    for la in k.launches:
        if name in la.kwargs:
            text = la.kwargs[name].strip()
            local = s.file.host_assigns.get(la.function, {}).get(text)
            texts.append((la.line, local[1] if local else text))
    if k.autotune is not None:
        for cfg in k.autotune.configs:
            if name in cfg:
                texts.append((k.autotune.line, cfg[name]))
            elif "source" in cfg:
                texts += [(k.autotune.line, v) for v in _config_values(s, cfg["source"], name)]
    for _var, text in _autotune_wrappers(s, k):  # tuned = triton.autotune(configs=get_configs(), ...)(kernel)
        m = re.search(r"configs\s*=\s*(.*?)(,\s*\w+\s*=|\)\s*\()", text, re.S)
        if m:
            texts += [(k.line, v) for v in _config_values(s, m.group(1), name)]
    for line, text in texts:
        text = s.file.constants.get(text, text).strip()
        if text.isdigit():
            found.append((line, int(text)))
        elif text and text != "None":
            chosen.append((line, text))
    hits = [(ln, v) for ln, v in found if (min_value is None or v >= min_value) and (max_value is None or v <= max_value)]
    if hits:
        return Verdict(ok=True, lines=sorted({ln for ln, _ in hits}), reasons=[f"{name}={hits[0][1]} (line {hits[0][0]})"])
    if chosen:
        return Verdict(ok=True, lines=[chosen[0][0]], reasons=[f"{name}={chosen[0][1]} chosen by the launcher (line {chosen[0][0]})"])
    seen = ", ".join(str(v) for _, v in found) or "no literal value"
    return Verdict(ok=False, reasons=[f"{name}: {seen}"])


@predicate()
def calls_like(
    s: Subject,
    *,
    name: list[str],
    depends_on: list[str] | None = None,
    in_loop: bool | None = None,
    min_count: int = 1,
) -> Verdict:
    """Kernel calls a function whose normalised name matches `name` (regular expressions), optionally on values derived from a variable or parameter matching `depends_on`."""
    hits = []
    for c in _kernel(s).calls:
        if not _call_matches(c, name):
            continue
        if depends_on is not None and not any(_matches_any(v, depends_on) for v in c.depends_on):
            continue
        if in_loop is not None and c.in_loop != in_loop:
            continue
        hits.append(c)
    desc = "call " + ("/".join(sorted({c.name for c in hits})) or readable(name))
    if depends_on:
        desc += f" on a value derived from {readable(depends_on)}"
    if in_loop is not None:
        desc += " in a loop" if in_loop else " outside loops"
    return _hit(hits, desc, min_count)


@predicate()
def loop_calls(s: Subject, *, each_of: list[list[str]], direct: bool = False, min_count: int = 1) -> Verdict:
    """One loop contains, for every group in `each_of`, a call matching one of the group's regular expressions (direct: in its own body, not a nested loop)."""
    k = _kernel(s)
    hits = []
    for lp in k.loops:
        inside = [c for c in k.calls if (c.loops[-1:] == [lp.line] if direct else lp.line in c.loops)]
        found = [next((c for c in inside if _call_matches(c, group)), None) for group in each_of]
        if all(found):
            hits.append((lp, found))
    if len(hits) >= min_count:
        lp, found = hits[0]
        shown = "; ".join(f"`{_code(c, 40)}` (line {c.line})" for c in found)
        return Verdict(ok=True, lines=[lp.line for lp, _ in hits], reasons=[f"loop at line {lp.line} calls {shown}"])
    return Verdict(ok=False, reasons=["no loop calling " + " and ".join(readable(g) for g in each_of)])


@predicate()
def reductions_share_load(
    s: Subject,
    *,
    ops: list[str] = ["tl.sum", "tl.max", "tl.min", "tl.reduce"],  # noqa: B006
    min_count: int = 2,
    of_row: bool = False,
) -> Verdict:
    """At least min_count reductions in one loop body (or in the loop-free body) derive from the same value loaded there: several reductions per read.

    `of_row`: only reductions of the loaded row itself count (its statistics: sum, sum of squares,
    max): the reduced expression reaches that one load through element-wise steps, not through a
    dot or another reduction (attention's q·k scores) nor as a product with another loaded tensor
    (a matrix-vector product written as tl.sum(h * k), a dot of two rows)."""
    k = _kernel(s)
    by_line = {lp.line: lp for lp in k.loops}
    in_any_loop = {v for lp in k.loops for v in lp.assigned}
    loaded = set(k.loaded)
    groups: dict[tuple[tuple[int, ...], str], list[CallSite]] = {}
    for c in k.calls:
        if c.name not in ops or c.via:
            continue  # calls inlined from a helper depend on its parameters, not the caller's values
        ctx = tuple(c.loops)
        inner = by_line.get(ctx[-1]) if ctx else None
        if ctx and inner is None:
            continue
        row = _row_loads(k, c.args[0]) if of_row and c.args else None
        for v in sorted(set(c.depends_on) & loaded):  # sorted: ties between groups resolve the same way every run
            if row is not None and row != {v}:
                continue
            if (inner is not None and v in inner.assigned) or (inner is None and v not in in_any_loop):
                groups.setdefault((ctx, v), []).append(c)
    best_key, best = max(groups.items(), key=lambda kv: len(kv[1]), default=(None, []))
    if len(best) >= min_count:
        # a value reached through an earlier statistic (mean of a first read) is no shared read:
        # the row is read once per statistic when its address is loaded more than twice
        # every row a reduction here reads counts: liger's KL-div reduces Q twice in one pass, but reads
        # the logits row X three times (max, then denominator, then gradient)
        reads = max((_reads_of(k, var) for _, var in sorted(groups)), key=len)
        if len(reads) > 2:
            where = ", ".join(str(c.line) for c in reads[:6])
            return Verdict(ok=False, reasons=[f"the row `{reads[0].args[0]}` is read {len(reads)} times (lines {where})"])
        lines = sorted({c.line for c in best})
        return Verdict(ok=True, lines=lines, reasons=[f"{len(best)} reductions of one loaded value in one pass (line {', '.join(map(str, lines[:6]))})"])
    return Verdict(ok=False, reasons=[f"no pass with {min_count} reductions of the same loaded value"])


def _row_loads(k: KernelFacts, text: str, depth: int = 4) -> set[str]:
    """The loaded variables (and loads written inline) an expression reaches through element-wise steps:
    not through a dot, a reduction or a scan (a new quantity), nor a where's mask. A variable first
    assigned a load is one (`x = tl.load(p).to(tl.float32)`), whatever refines it later (`x = x * s`);
    with depth 0 no variable is followed (only loads written in the expression are found)."""
    tree = _parse(text)
    if tree is None:
        return set()
    out: set[str] = set()
    todo: list[ast.AST] = [tree]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Call):
            name = ast.unparse(node.func)
            if name in _CONTRACTIONS:
                continue
            if name == "tl.load" or name.endswith(".load"):
                out.add(ast.unparse(node))
                continue
            todo += node.args[1:] if name == "tl.where" else [node.func, *node.args]
            continue
        if isinstance(node, ast.Name):
            if depth > 0 and node.id in k.assigns:
                if _row_loads(k, k.first_assigns.get(node.id, k.assigns[node.id])[1], 0):
                    out.add(node.id)  # first assigned a load (element-wise steps on it: a cast, a scale)
                else:
                    text = k.assigns[node.id][1]
                    sub = _row_loads(k, text, depth - 1)
                    if not sub and node.id in k.loaded and not any(f"{c}(" in text for c in _CONTRACTIONS):
                        # derived from loads, but not element-wise from one here nor a statistic of one:
                        # a state carried across iterations (`h += k[:, None] * v[None, :]`)
                        sub = {"?" + node.id}
                    out |= sub
            continue
        todo += list(ast.iter_child_nodes(node))
    return out


def _reads_of(k: KernelFacts, var: str) -> list[CallSite]:
    """Every tl.load of the address `var` was loaded from (same pointer expression, helpers excluded)."""
    loads = [c for c in k.calls if c.name == "tl.load" and c.args and not c.via]
    # the last assignment, or the first one when the value is reworked after its load
    # (`x = tl.load(...)` then `x = tl.where(mask, x / T, -inf)`)
    lines = [a[0] for a in (k.assigns.get(var), k.first_assigns.get(var)) if a]
    source = next((c for ln in lines for c in loads if c.line == ln), None)
    if source is None:
        return []
    ptr = " ".join(source.args[0].split())
    return [c for c in loads if " ".join(c.args[0].split()) == ptr]


@predicate()
def epilogue_calls(s: Subject, *, name: list[str], after: list[str] = ["tl\\.dot"], min_count: int = 1) -> Verdict:  # noqa: B006
    """Calls matching `name` sit outside loops after the last loop that calls `after` (regular expressions): work fused into the producer's epilogue."""
    k = _kernel(s)
    producers = [lp for lp in k.loops if any(lp.line in c.loops and _call_matches(c, after) for c in k.calls)]
    if not producers:
        return Verdict(ok=False, reasons=[f"no loop calling {readable(after)}"])
    # the innermost producing loops (the K loop, not a persistent tile loop around it); the epilogue
    # runs after one of them in the loops around it: outside every loop, or per tile of a persistent loop
    inner = [lp for lp in producers if not any(o is not lp and lp.line < o.line <= lp.end_line for o in producers)]
    hits = []
    for lp in inner:
        outer = sorted(o.line for o in k.loops if o.line < lp.line and o.end_line >= lp.end_line)
        hits += [c for c in k.calls if c.line > lp.end_line and sorted(c.loops) == outer and _call_matches(c, name)]
    hits = list({id(c): c for c in hits}.values())
    return _hit(hits, f"epilogue {'/'.join(sorted({c.name for c in hits})) or readable(name)} after the {readable(after)} loop", min_count)


def _launch_binding(k: KernelFacts, la) -> dict[str, str]:
    """Kernel parameter -> the launcher's argument text (a plain name when it is one)."""
    out = {p.name: " ".join(a.split()) for p, a in zip(k.params, la.args)}
    out.update({n: " ".join(a.split()) for n, a in la.kwargs.items() if k.param(n) is not None})
    return out


def _base_param(k: KernelFacts, text: str, seen: frozenset[str] = frozenset()) -> str:
    """The pointer parameter an address is based on: the first parameter it reaches, in the order
    written (`b + o_n * K` is b's, not K's), through local assignments."""
    params = {p.name for p in k.params if not p.constexpr}
    for n in re.findall(r"(?<![\w.])[A-Za-z_]\w*", text):
        if n in params:
            return n
        if n in k.assigns and n not in seen:
            inner = _base_param(k, k.assigns[n][1], seen | {n})
            if inner:
                return inner
    return ""


def _through(k: KernelFacts, op: str) -> set[str]:
    """Pointer parameters the kernel loads (`tl.load`) or stores (`tl.store`, atomics) through."""
    names = ("tl.load",) if op == "load" else ("tl.store",)
    out: set[str] = set()
    for c in k.calls:
        if c.args and not c.via and (c.name in names or (op == "store" and c.name.startswith("tl.atomic_"))):
            out.add(_base_param(k, c.args[0]))
    return out - {""}


@predicate()
def launch_neighbour(s: Subject, *, role: Literal["producer", "consumer"], holds: str | None = None,
                     args: dict | None = None) -> Verdict:
    """Another kernel of this file is launched in the same host function before this kernel's launch and
    stores a tensor this kernel loads (role producer), or after it and loads a tensor this kernel stores
    (role consumer): data passed through memory between two launches. `holds`: a predicate (with `args`)
    true of that other kernel, e.g. nibble_unpack for a dequantize-then-GEMM pair."""
    if holds is not None and holds not in PREDICATES:
        raise ValueError(f"launch_neighbour: unknown predicate '{holds}' in holds")
    k = _kernel(s)
    mine_in, mine_out = _through(k, "load"), _through(k, "store")
    for la in k.launches:
        here = _launch_binding(k, la)
        for other in s.file.kernels:
            if other.name == k.name or other.device_function:
                continue
            for ol in other.launches:
                if ol.function != la.function or (ol.line < la.line) != (role == "producer") or ol.line == la.line:
                    continue
                there = _launch_binding(other, ol)
                if role == "producer":
                    shared = {here[p] for p in mine_in if p in here} & {there[p] for p in _through(other, "store") if p in there}
                else:
                    shared = {here[p] for p in mine_out if p in here} & {there[p] for p in _through(other, "load") if p in there}
                shared = {t for t in shared if re.fullmatch(r"[A-Za-z_][\w.]*", t)}
                if not shared:
                    continue
                if holds is not None:
                    v = PREDICATES[holds].func(Subject(s.file, other), **(args or {}))
                    if not v.ok:
                        continue
                what = "writes" if role == "producer" else "reads"
                return Verdict(ok=True, lines=sorted({ol.line, la.line}), reasons=[
                    f"{other.name} (launched at line {ol.line}) {what} `{sorted(shared)[0]}`, which this kernel "
                    f"{'reads' if role == 'producer' else 'writes'} (line {la.line})"])
    return Verdict(ok=False, reasons=[f"no kernel launched {'before' if role == 'producer' else 'after'} this one "
                                      f"{'writes what it reads' if role == 'producer' else 'reads what it writes'}"
                                      + (f" with {holds}" if holds else "")])


@predicate(scope="file")
def launch_sequence(s: Subject, *, min_kernels: int = 2) -> Verdict:
    """One host function launches at least min_kernels different Triton kernels (later ones may re-read what earlier ones wrote)."""
    by_fn: dict[str, list] = {}
    for la in s.file.launches:
        by_fn.setdefault(la.function, []).append(la)
    for fn, las in by_fn.items():
        names = list(dict.fromkeys(la.kernel for la in las))
        if len(names) >= min_kernels:
            return Verdict(ok=True, lines=[la.line for la in las], reasons=[f"{fn} launches {', '.join(names)}"])
    return Verdict(ok=False, reasons=[f"no host function launches {min_kernels} kernels"])


@predicate()
def loop_option(s: Subject, *, name: str, values: list[str] | None = None, min_count: int = 1) -> Verdict:
    """A loop's range call passes keyword `name` (with one of `values`), e.g. tl.range(..., warp_specialize=True)."""
    k = _kernel(s)
    hits = [lp for lp in k.loops if name in lp.kwargs and (values is None or _unquote(lp.kwargs[name]) in values)]
    desc = f"loop with {name}" + (f"∈{values}" if values else "")
    if len(hits) >= min_count:
        return Verdict(ok=True, lines=[lp.line for lp in hits], reasons=[f"{desc} (line {', '.join(str(lp.line) for lp in hits[:6])})"])
    return Verdict(ok=False, reasons=[f"no {desc}"])


# --------------------------------------------------------------------------------------
# structure over names: techniques recognised by what the code does, however it is spelled
# --------------------------------------------------------------------------------------


def _factors(node: ast.expr) -> list[ast.expr]:
    """The factors of a product `a * b * c` (a lone expression is its own factor)."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        return _factors(node.left) + _factors(node.right)
    return [node]


def _parse(text: str) -> ast.expr | None:
    """The expression `text` (None if it is not one); callers only read the tree, so it is shared."""
    return _parse_cached(text.strip())


@lru_cache(maxsize=16384)
def _parse_cached(text: str) -> ast.expr | None:
    # the same expression texts are parsed by many predicates and patterns over one kernel
    try:
        return ast.parse(text, mode="eval").body
    except SyntaxError:
        return None


@predicate()
def welford_update(s: Subject) -> Verdict:
    """A Welford update written inline: an accumulator grows by (x - mean_new) * (x - mean_old), two deviations of one value from two means, whatever the helpers are called."""
    k = _kernel(s)
    candidates = [(var, e.partition(":")[2]) for var, exprs in k.accumulates.items() for e in exprs if e.startswith("add:")]
    candidates += [(var, expr) for var, (_, expr) in k.assigns.items() if var in expr and _rx(rf"\b{re.escape(var)}\s*\+").search(expr)]
    for var, text in candidates:
        node = _parse(text)
        if node is None:
            continue
        deviations = []
        for f in _factors(node.right if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add)
                          and ast.unparse(node.left) == var else node):
            if isinstance(f, ast.Name) and f.id in k.assigns:  # delta = x - mean; acc += delta * delta2
                f = _parse(k.assigns[f.id][1]) or f
            if isinstance(f, ast.BinOp) and isinstance(f.op, ast.Sub):
                deviations.append((ast.unparse(f.left), ast.unparse(f.right)))
        if any(a[0] == b[0] and a[1] != b[1] for i, a in enumerate(deviations) for b in deviations[i + 1:]):
            line = k.assigns.get(var, (k.line, ""))[0]
            shown = " ".join(text.split())[:50]
            return Verdict(ok=True, lines=[line], reasons=[f"Welford update of {var}: `{var} += {shown}` (line {line})"])
    return Verdict(ok=False, reasons=["no accumulator of (x - new mean) * (x - old mean)"])


_TUNER_DECORATOR = re.compile(r"(?i)tun(e|er|ing)")
_CONFIG_SOURCE = re.compile(r"(?i)(config|cfg|tun|best|lookup|table|meta)")


@predicate()
def tuned_elsewhere(s: Subject) -> Verdict:
    """Tile sizes or launch options chosen per shape by something other than @triton.autotune: another autotuner's decorator (libtuner, a project's autotune), an autotune wrapper applied to the kernel (`f = triton.autotune(...)(kernel)`), or launch values read from a tuned config (`**config`, `config.num_warps`, `_get_config(M)[4]`, a per-device JSON table)."""
    k = _kernel(s)
    for d in k.decorators:
        last = d.rsplit(".", 1)[-1]
        if d != "triton.autotune" and _TUNER_DECORATOR.search(last):
            return Verdict(ok=True, lines=[k.line], reasons=[f"tuned by @{d} (line {k.line})"])
    for name, text in _autotune_wrappers(s, k):
        return Verdict(ok=True, lines=[k.line], reasons=[f"autotuned by wrapping: {name} = {' '.join(text.split())[:60]}"])
    at = k.autotune
    if at is not None and at.configs and not at.generated:
        # configs whose values are set per deployment (`BV=GDN_CHUNK_H_BV`, an env knob read at import)
        named = sorted({v.strip() for cfg in at.configs for key, v in cfg.items() if key != "source"
                        and re.fullmatch(r"[A-Za-z_][\w.]*", v.strip()) and v.strip() not in ("None", "True", "False")
                        and not re.fullmatch(r"[\d.]+", s.file.constants.get(v.strip(), "").strip())})  # `BLOCK = 128`: fixed
        if named:
            source = s.file.constants.get(named[0], "")
            return Verdict(ok=True, lines=[at.line], reasons=[f"@triton.autotune config values from {', '.join(named[:3])}"
                                                              + (f" = `{' '.join(source.split())[:40]}`" if source else "") + f" (line {at.line})"])
    for la in k.launches:
        local = s.file.host_assigns.get(la.function, {})
        for text in [*la.args, *la.kwargs.values()]:
            source = local[text][1] if text in local else text
            if re.fullmatch(r"[\w.\[\]'\"]+", text) and re.search(r"(?i)\b\w*(config|cfg)\w*\b", text):
                return Verdict(ok=True, lines=[la.line], reasons=[f"launch takes `{text}` from a tuned config (line {la.line})"])
            call = re.match(r"\(?\s*([\w.]+)\s*\(", source)
            if text in local and call and _CONFIG_SOURCE.search(call.group(1).rsplit(".", 1)[-1]):
                return Verdict(ok=True, lines=[la.line], reasons=[f"launch takes `{text}` = `{source[:50]}` from a config table (line {la.line})"])
    return Verdict(ok=False, reasons=["no autotuner or tuned config other than @triton.autotune"])


_GRID_SIZE = r"(?i)(num_sms|n_sms|nsms|num_ctas|grid_size|num_programs|num_progs|num_cores?|num_workers|num_pid)"


@predicate()
def grid_stride_loop(s: Subject) -> Verdict:
    """Programs walk work items with the grid as stride: a program_id-derived index advanced by tl.num_programs or a NUM_SMS-like value in a loop (`for t in range(pid, n, NUM_SMS)`, or `tile += NUM_SMS` in a while loop)."""
    k = _kernel(s)
    grid = {p.name for p in k.params if _matches_any(p.name, [_GRID_SIZE])}
    grid |= {v for v, (_, e) in k.assigns.items() if "tl.num_programs" in e or _matches_any(v, [_GRID_SIZE])}

    def strides(text: str) -> bool:
        return "tl.num_programs" in text or any(re.search(rf"\b{re.escape(g)}\b", text) for g in grid)

    for lp in k.loops:
        if lp.start_pid_axes and len(lp.args) >= 3 and strides(lp.args[2]):
            return Verdict(ok=True, lines=[lp.line], reasons=[f"loop over `{lp.iter}` strides by the grid (line {lp.line})"])
    for var, exprs in k.accumulates.items():
        if k.pid_deps.get(var) and any(e.startswith("add:") and strides(e[4:]) for e in exprs):
            line = next((lp.line for lp in k.loops if var in lp.assigned), k.line)
            return Verdict(ok=True, lines=[line], reasons=[f"{var} advances by the grid size in the loop at line {line}"])
    return Verdict(ok=False, reasons=["no loop striding by the grid size"])


@predicate()
def recurrence_state(s: Subject) -> Verdict:
    """A state carried across a loop's iterations and updated from itself: `h = a * h + x`, or `h *= decay` then `h += ...` (a linear recurrence over the loop index)."""
    k = _kernel(s)
    for lp in k.loops:
        for var in lp.assigned:
            if var == lp.target:
                continue
            # only updates inside this loop: `acc += tl.dot(a, b)` in a K loop and `acc = acc * scale`
            # after it (an epilogue) is a GEMM accumulator, not a decayed state
            inside = range(lp.line, lp.end_line + 1)
            lines = k.accumulate_lines.get(var, [])
            ops = {e.partition(":")[0] for i, e in enumerate(k.accumulates.get(var, [])) if i >= len(lines) or lines[i] in inside}
            history = k.assign_history.get(var) or ([k.assigns[var]] if var in k.assigns else [])
            exprs = [(ln, e) for ln, e in history if ln in inside]
            own = rf"\b{re.escape(var)}\b"
            if any(("tl.load" in e or ".load(" in e) and not _rx(own).search(e) for _, e in exprs):
                continue  # read afresh every iteration (`b_q = tl.load(p_q)`, then normalised): nothing is carried
            own = rf"\b{re.escape(var)}\b"
            # each pattern below needs the name in the text
            scaled = "multiply" in ops or any(var in e and _rx(rf"\*\s*{own}|{own}\s*\*").search(e) for _, e in exprs)
            added = "add" in ops or any(var in e and _rx(own).search(e) and "+" in e for _, e in exprs)
            if scaled and added and var in k.loaded:
                line = exprs[-1][0] if exprs else k.assigns.get(var, (lp.line, ""))[0]
                return Verdict(ok=True, lines=[line], reasons=[f"{var} is decayed and updated every iteration of the loop at line {lp.line}"])
    return Verdict(ok=False, reasons=["no state decayed and updated across loop iterations"])


_GATE_MATH = [r"(.*[._])?(exp|exp2|log|log2|sigmoid|softplus|sqrt|rsqrt|tanh)"]


@predicate()
def hoisted_loop_constants(s: Subject, *, transformed: bool = False) -> Verdict:
    """Values loaded outside every loop that a loop then uses (transformed: only those also put through exp, log, sigmoid, softplus, sqrt, ... there): constants read and derived once, not per iteration."""
    k = _kernel(s)
    in_loops = {v for lp in k.loops for v in lp.assigned}
    used_in_loops = {v for c in k.calls if c.loops for v in c.depends_on}
    for c in k.calls:
        if c.loops or c.via:
            continue
        math = _call_matches(c, _GATE_MATH)
        if c.name != "tl.load" and not (math and (set(c.depends_on) & set(k.loaded) or any("load(" in a for a in c.args))):
            continue
        if transformed and not math:
            continue
        derived = [v for v, (line, _) in k.assigns.items() if line == c.line and v not in in_loops]
        used = [v for v in derived if v in used_in_loops]
        if used:
            return Verdict(ok=True, lines=[c.line], reasons=[f"{used[0]} = `{_code(c)}` once before the loop (line {c.line})"])
    return Verdict(ok=False, reasons=["no loop constant loaded before the loop"])


@predicate()
def launched_after_another_kernel(s: Subject) -> Verdict:
    """A host function launches this kernel after launching another Triton kernel: its prologue could overlap that kernel's tail."""
    k = _kernel(s)
    for la in k.launches:
        before = [o for o in s.file.launches if o.function == la.function and o.line < la.line and o.kernel != la.kernel]
        if before:
            return Verdict(ok=True, lines=[before[-1].line, la.line],
                           reasons=[f"{la.function} launches {before[-1].kernel} (line {before[-1].line}) then {k.name} (line {la.line})"])
    return Verdict(ok=False, reasons=["not launched right after another kernel"])


@predicate()
def descriptor_params(s: Subject) -> Verdict:
    """The kernel loads or stores through a parameter's own methods (`desc.load([m, k])`): a tensor descriptor made on the host."""
    k = _kernel(s)
    params = {p.name for p in k.params if not p.constexpr}
    hits = [c for c in k.calls if "." in c.name and c.name.split(".", 1)[0] in params
            and c.name.rsplit(".", 1)[-1] in ("load", "store", "gather", "scatter", "atomic_add")]
    return _hit(hits, "load/store through a descriptor parameter")


# --------------------------------------------------------------------------------------
# native code (CUDA/C++, pybind11), file scope: facts from patterns.distill.native.
# The distiller also evaluates these on each native function alone, so a hit is
# attributed to the function; `patterns` commands on Python files see no native facts.
# --------------------------------------------------------------------------------------

NativeKind = Literal[tuple(sorted(NATIVE_KINDS))]  # type: ignore[valid-type]


@predicate(scope="file")
def native_construct(
    s: Subject,
    *,
    kinds: list[NativeKind],
    names: list[str] | None = None,
    in_kernel: bool | None = None,
    min_count: int = 1,
) -> Verdict:
    """Native code uses one of `kinds` (tma_copy, tma_descriptor, mbarrier, wgmma, umma, reg_realloc, persistent_loop, scale_promotion, fp8, pdl, ...), optionally named like `names` (regular expressions), inside a __global__ kernel or not."""
    nat = s.file.native
    if nat is None:
        return Verdict(ok=False, reasons=["no native code"])
    found = []
    for fn in nat.functions:
        if in_kernel is not None and fn.is_kernel != in_kernel:
            continue
        found += [c for c in fn.constructs if c.kind in kinds]
    if in_kernel is not True:
        found += [c for c in nat.constructs if c.kind in kinds]
    if names is not None:
        found = [c for c in found if any(re.search(p, c.name) for p in names)]
    desc = "/".join(sorted({c.kind for c in found}) or kinds)
    if len(found) >= min_count:
        lines = sorted({c.line for c in found})
        shown = ", ".join(sorted({c.name for c in found})[:3])
        return Verdict(ok=True, lines=lines, reasons=[f"{desc}: {shown} (line {', '.join(map(str, lines[:6]))})"])
    return Verdict(ok=False, reasons=[f"no {desc} in native code" if not found else f"only {len(found)}× {desc}, need {min_count}"])


@predicate(scope="file")
def native_kernel(s: Subject, *, template: bool | None = None, min_template_params: int = 0, launch_bounds: bool | None = None) -> Verdict:
    """The native file defines a CUDA kernel (__global__ / CUTLASS_GLOBAL), optionally a template with at least min_template_params parameters, with or without __launch_bounds__."""
    nat = s.file.native
    if nat is None:
        return Verdict(ok=False, reasons=["no native code"])
    hits = []
    for fn in nat.functions:
        if not fn.is_kernel:
            continue
        if template is not None and bool(fn.template_params) != template:
            continue
        if len(fn.template_params) < min_template_params:
            continue
        if launch_bounds is not None and ("__launch_bounds__" in fn.qualifiers) != launch_bounds:
            continue
        hits.append(fn)
    if hits:
        return Verdict(ok=True, lines=[fn.line for fn in hits], reasons=[f"CUDA kernel {hits[0].name} ({len(hits[0].template_params)} template parameters, line {hits[0].line})"])
    return Verdict(ok=False, reasons=["no matching CUDA kernel"])


@predicate(scope="file")
def pybind_binding(
    s: Subject,
    *,
    releases_gil: bool | None = None,
    blocking: bool | None = None,
    name: list[str] | None = None,
    min_count: int = 1,
) -> Verdict:
    """pybind11 functions exposed with m.def, with or without a GIL release (call_guard or gil_scoped_release in the bound body), optionally only those whose bound body blocks (synchronize, wait, sleep, join)."""
    nat = s.file.native
    if nat is None:
        return Verdict(ok=False, reasons=["no native code"])
    hits = []
    for b in nat.bindings:
        if releases_gil is not None and b.releases_gil != releases_gil:
            continue
        if blocking is not None and bool(b.blocking) != blocking:
            continue
        if name is not None and not any(re.search(p, b.name) for p in name):
            continue
        hits.append(b)
    desc = "pybind11 binding" + ("" if releases_gil is None else (" releasing the GIL" if releases_gil else " holding the GIL"))
    if blocking:
        desc += " around a blocking call"
    if len(hits) >= min_count:
        return Verdict(ok=True, lines=sorted({b.line for b in hits}), reasons=[f"{desc}: {', '.join(b.name for b in hits[:4])} (line {hits[0].line})"])
    return Verdict(ok=False, reasons=[f"no {desc}"])


@predicate()
def sum_and_sum_of_squares(s: Subject) -> Verdict:
    """One pass reduces both x and x*x of the same value (raw moments: var = E[x^2] - E[x]^2 follows)."""
    k = _kernel(s)
    summed: dict[str, set[str]] = {}  # variable -> {"x", "x2"}
    lines: list[int] = []

    def note(expr: str, line: int) -> None:
        expr = expr.split(",")[0].strip()
        m = re.fullmatch(r"(\w+)\s*\*\s*(\w+)", expr)
        if m and m.group(1) == m.group(2):
            summed.setdefault(m.group(1), set()).add("x2")
            lines.append(line)
        elif re.fullmatch(r"\w+", expr):
            summed.setdefault(expr, set()).add("x")
            lines.append(line)

    for c in k.calls_named("tl.sum"):
        if c.args:
            note(c.args[0], c.line)
    for var, exprs in k.accumulates.items():
        for e in exprs:
            op, _, expr = e.partition(":")
            if op == "add":
                inner = re.fullmatch(r"tl\.sum\((.*)\)", expr.strip())
                note(inner.group(1) if inner else expr, k.assigns.get(var, (k.line, ""))[0])
    both = [v for v, kinds in summed.items() if kinds == {"x", "x2"}]
    if both:
        return Verdict(ok=True, lines=sorted(set(lines)), reasons=[f"sum and sum of squares of {', '.join(both)} in one pass"])
    return Verdict(ok=False, reasons=["no sum together with sum of squares of one value"])


@predicate()
def modulo_indexed_load(s: Subject) -> Verdict:
    """A load whose offset is taken modulo a value no program id feeds (`table + o % C`): at most that many elements, re-read by every program."""
    k = _kernel(s)
    hits = []
    for c in k.calls_named("tl.load"):
        if not c.args:
            continue
        ptr = c.args[0].strip()
        ptr = k.assigns[ptr][1] if ptr in k.assigns else ptr  # p_s = table + o % C; tl.load(p_s)
        moduli = re.findall(r"%\s*([A-Za-z_]\w*|\d+)\b", ptr)
        if any(m.isdigit() or m not in k.pid_deps for m in moduli):
            hits.append(c)
    return _hit(hits, "tl.load indexed modulo a program-independent size")


# --------------------------------------------------------------------------------------
# technique features (mined by patterns.distill.techniques; any pattern may use them)
# --------------------------------------------------------------------------------------

_IDENT = re.compile(r"[A-Za-z_]\w*")


def _closure(k: KernelFacts, text: str, depth: int = 4) -> set[str]:
    """Names an expression derives from, through the kernel's (last) assignments."""
    seen: set[str] = set()
    frontier = set(_IDENT.findall(text))
    for _ in range(depth):
        nxt: set[str] = set()
        for n in frontier - seen:
            seen.add(n)
            if n in k.assigns:
                nxt |= set(_IDENT.findall(k.assigns[n][1]))
        frontier = nxt
    return seen | frontier


@predicate()
def calls_with_arg(s: Subject, *, name: list[str], arg: list[str], min_count: int = 1) -> Verdict:
    """Kernel calls a function matching `name` (regular expressions) with a positional or keyword argument whose text contains a match of `arg` (regular expressions), e.g. `.to(tl.int64)`."""
    rx = _compiled(tuple(arg))
    hits = [c for c in _kernel(s).calls if _call_matches(c, name)
            and any(p.search(a) for a in [*c.args, *c.kwargs.values()] for p in rx)]
    return _hit(hits, f"call {readable(name)} with argument {readable(arg)}", min_count)


@predicate()
def indirect_load(s: Subject, *, index: list[str], min_count: int = 1) -> Verdict:
    """A tl.load/tl.store whose address derives from values loaded out of an index table (a parameter matching `index`, regular expressions): a gather through block tables, token maps or sorted ids."""
    k = _kernel(s)
    loaded = set(k.loaded)
    # loaded variables whose own load reads the index table
    idx_vars = {v for v in loaded if v in k.assigns and "load" in k.assigns[v][1]
                and any(_matches_any(n, index) for n in _closure(k, k.assigns[v][1]) if k.param(n) is not None)}
    hits = []
    for c in k.calls_named("tl.load", "tl.store"):
        ptr = c.args[0] if c.args else c.kwargs.get("pointer", "")
        if ptr and _closure(k, ptr) & idx_vars:
            hits.append(c)
    return _hit(hits, f"load/store addressed through values read from {readable(index)}", min_count)


@predicate()
def kernel_named(s: Subject, *, names: list[str], docstring: bool = False) -> Verdict:
    """The kernel's name (or, with docstring, its docstring) contains a match of one of `names` (regular expressions): what upstream calls the technique."""
    k = _kernel(s)
    text = k.docstring if docstring else k.name
    m = next((p.search(text) for p in _compiled(tuple(names)) if p.search(text)), None)
    where = "docstring" if docstring else "name"
    if m:
        return Verdict(ok=True, lines=[k.line], reasons=[f"kernel {where} mentions '{m.group(0)[:40]}' (line {k.line})"])
    return Verdict(ok=False, reasons=[f"kernel {where} does not mention {readable(names)}"])


@predicate(scope="file")
def dispatch_table(s: Subject, *, keys: list[str] | None = None, min_entries: int = 2) -> Verdict:
    """A module-level dict maps at least min_entries keys (their text matching `keys`, regular expressions, when given) to functions or kernels: implementations chosen by a table, not an if-chain."""
    f = s.file
    callables = set(f.host_functions) | {k.name for k in f.kernels} | set(f.imports)
    for name, text in f.constants.items():
        if not text.lstrip().startswith("{") or len(text) > 20_000:
            continue
        node = _parse(text)
        if not isinstance(node, ast.Dict):
            continue
        pairs = []
        for kn, vn in zip(node.keys, node.values):
            if kn is None:
                continue
            target = vn.id if isinstance(vn, ast.Name) else (ast.unparse(vn).split(".")[0] if isinstance(vn, ast.Attribute) else "")
            if target in callables and (keys is None or any(p.search(ast.unparse(kn)) for p in _compiled(tuple(keys)))):
                pairs.append(ast.unparse(kn))
        if len(pairs) >= min_entries:
            return Verdict(ok=True, reasons=[f"dispatch table {name}: {len(pairs)} keys ({', '.join(pairs[:3])[:60]}) map to functions"])
    return Verdict(ok=False, reasons=["no module-level table of functions"])

# ======================================================================================
# p14a block (issue #14: memory/layout, reductions, fusion, launch, numerics patterns).
# Helper p14b adds its own block; keep these together to keep merges easy.
# ======================================================================================


def _launch_sources(s: Subject, la) -> list[tuple[int, str, str]]:
    """(position or -1, parameter name, source text) of each launch argument; a bare name is
    followed to its assignment in the launcher (`x = x.contiguous(); k[g](x)` gives `x.contiguous()`)."""
    k = _kernel(s)
    local = s.file.host_assigns.get(la.function, {})
    names = [p.name for p in k.params]
    out = []
    for i, text in enumerate(la.args):
        src = local[text][1] if text in local else text
        out.append((i, names[i] if i < len(names) else "", f"{text} = {src}" if text in local else text))
    for name, text in la.kwargs.items():
        src = local[text][1] if text in local else text
        out.append((-1, name, f"{text} = {src}" if text in local else text))
    return out


def _pointer_params(k: KernelFacts, text: str, depth: int = 4) -> set[str]:
    """Parameters an address expression reaches, following local assignments."""
    params = {p.name for p in k.params}
    seen: set[str] = set()
    todo = set(re.findall(r"[A-Za-z_]\w*", text))
    while todo and depth >= 0:
        depth -= 1
        nxt: set[str] = set()
        for n in todo - seen:
            seen.add(n)
            if n in k.assigns and n not in params:
                nxt |= set(re.findall(r"[A-Za-z_]\w*", k.assigns[n][1]))
        todo = nxt
    return seen & params


@predicate()
def launch_arg_source(
    s: Subject,
    *,
    patterns: list[str],
    stored_only: bool = False,
    constexpr: bool | None = None,
    names: list[str] | None = None,
    min_count: int = 1,
) -> Verdict:
    """A launch argument of this kernel is (or is assigned in the launcher from) an expression matching one of `patterns` (regular expressions, searched), e.g. `\\.contiguous\\(`, `\\.item\\(`, `torch\\.zeros`.

    `stored_only`: the kernel only stores through the matching parameter (no load, no atomic): an output.
    `constexpr`: the matching parameter is (or is not) a tl.constexpr. `names`: only arguments bound to parameters or launch options matching these (e.g. num_warps)."""
    k = _kernel(s)
    hits = []
    for la in k.launches:
        for _pos, name, text in _launch_sources(s, la):
            if not _matches_search(text, patterns) or (names is not None and not _matches_any(name, names)):
                continue
            p = k.param(name)
            if constexpr is not None and (p is None or p.constexpr != constexpr):
                continue
            if stored_only:
                if p is None:
                    continue
                reads = [c for c in k.calls if (c.name == "tl.load" or c.name.startswith("tl.atomic_")) and c.args
                         and name in _pointer_params(k, c.args[0])]
                writes = [c for c in k.calls if c.name == "tl.store" and c.args and name in _pointer_params(k, c.args[0])]
                if reads or not writes:
                    continue
                # a buffer handed to several kernels may be written in parts, the rest left to the fill
                var = text.split(" = ", 1)[0]
                others = [o for o in s.file.launches if o.function == la.function and o.line != la.line
                          and var in [*o.args, *o.kwargs.values()]]
                if others:
                    continue
            hits.append((la.line, name or "?", text))
    if len(hits) >= min_count:
        line, name, text = hits[0]
        shown = " ".join(text.split())
        shown = shown if len(shown) <= 60 else shown[:58] + "…"
        return Verdict(ok=True, lines=sorted({h[0] for h in hits}), reasons=[f"launch passes {name} as `{shown}` (line {line})"])
    return Verdict(ok=False, reasons=["no launch argument made by " + readable(patterns)])


def _matches_search(value: str, patterns: list[str]) -> bool:
    return any(re.search(p, value) for p in patterns)


_REDUCTIONS = ("tl.sum", "tl.max", "tl.min", "tl.reduce", "tl.xor_sum")


@predicate()
def atomic_value(s: Subject, *, reduced: bool, scalar_address: bool = True) -> Verdict:
    """An atomic whose value is (reduced) or is not a block reduction (tl.sum, tl.max, ...) of the program's data; scalar_address: its address has no tl.arange lanes, so every lane of a block value hits one address."""
    k = _kernel(s)
    lanes = {v for v, o in k.origins.items() if o == "tl.arange"}
    hits = []
    for c in k.calls:
        if not c.name.startswith("tl.atomic_") or c.name == "tl.atomic_cas" or len(c.args) < 2:
            continue
        # lanes that add nothing (`o * 0`, tl.zeros_like(o)) are the usual way to give a block value one address
        addr = re.sub(r"\b\w+\s*\*\s*0\b|\btl\.zeros(_like)?\([^()]*\)|\bl?\w*\s*\*\s*0\b", "0", c.args[0])
        def has_lanes(text: str) -> bool:
            reach = _expand_names(k, text, depth=6)
            return "tl.arange" in text or bool(reach & lanes) or any("tl.arange" in k.assigns.get(n, (0, ""))[1] for n in reach)

        addr_lanes = has_lanes(addr)
        if scalar_address and addr_lanes:
            continue
        value = c.args[1]
        names = _expand_names(k, value, stop_at_reduction=True)
        is_reduced = any(r + "(" in value for r in _REDUCTIONS) or any(k.origins.get(n) in _REDUCTIONS for n in names)
        if not is_reduced and not has_lanes(value):
            continue  # a scalar (a count of 1, a flag): nothing to reduce
        if is_reduced == reduced:
            hits.append(c)
    what = "atomic of a block reduction" if reduced else "atomic of an unreduced block"
    return _hit(hits, what + (" to one address" if scalar_address else ""))


def _expand_names(k: KernelFacts, text: str, depth: int = 4, stop_at_reduction: bool = False) -> set[str]:
    """Local names an expression reaches through assignments (a reduction's result stops the walk when asked)."""
    seen: set[str] = set()
    todo = set(re.findall(r"[A-Za-z_]\w*", text))
    while todo and depth >= 0:
        depth -= 1
        nxt: set[str] = set()
        for n in todo - seen:
            seen.add(n)
            if n in k.assigns and not (stop_at_reduction and k.origins.get(n) in _REDUCTIONS):
                nxt |= set(re.findall(r"[A-Za-z_]\w*", k.assigns[n][1]))
        todo = nxt
    return seen


@predicate()
def scalar_param_load(s: Subject) -> Verdict:
    """The kernel loads a single value through a pointer parameter with no offset (`tl.load(scale_ptr)`): a per-launch scalar kept on the device."""
    k = _kernel(s)
    params = {p.name for p in k.params if not p.constexpr}
    hits = [c for c in k.calls_named("tl.load") if c.args and c.args[0].strip() in params and not c.kwargs.get("mask")]
    return _hit(hits, "scalar loaded from a pointer parameter")


_LOW_FLOAT = ["tl.float16", "tl.bfloat16", "tl.float8e4nv", "tl.float8e5", r".*\.dtype\.element_ty", r".*\.dtype"]


@predicate()
def accumulator_dtype(s: Subject, *, dtypes: list[str]) -> Verdict:
    """A loop accumulates into a value made by tl.zeros/tl.full (or a tl.dot with out_dtype) whose dtype matches `dtypes` (regular expressions over the dtype as written: tl.float32, tl.float16, x.dtype.element_ty)."""
    k = _kernel(s)
    in_loops = {v for lp in k.loops for v in lp.assigned}
    hits = []
    for c in k.calls:
        if c.in_loop:
            if c.name == "tl.dot" and "out_dtype" in c.kwargs and _matches_any(c.kwargs["out_dtype"], dtypes):
                hits.append(c)
            continue
        if c.name not in ("tl.zeros", "tl.full"):
            continue
        dt = c.kwargs.get("dtype") or (c.args[-1] if len(c.args) >= (3 if c.name == "tl.full" else 2) else "")
        if not dt or not _matches_any(dt.strip(), dtypes):
            continue
        made = [v for v, o in k.origins.items() if o == c.name and v in in_loops]
        made = [v for v in made if v in k.accumulates or re.search(rf"\b{re.escape(v)}\b", k.assigns.get(v, (0, ""))[1])]
        if made:
            hits.append(c)
    return _hit(hits, f"accumulator of dtype {readable(dtypes)}")


@predicate()
def residual_add_stored(s: Subject) -> Verdict:
    """The kernel adds two loaded values, stores the sum and reduces it (`h = x + r; store(h); sum(h * h)`): a residual add fused into a normalisation."""
    k = _kernel(s)
    loaded = set(k.loaded)
    sums = set()
    for v, (_, text) in k.assigns.items():
        node = _parse(text)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            sides = [node.left, node.right]
            ok = all((isinstance(x, ast.Name) and x.id in loaded) or "load(" in ast.unparse(x) for x in sides)
            if ok:
                sums.add(v)
    for var, exprs in k.accumulates.items():  # x += r where both are loaded
        if var in loaded and any(e.startswith("add:") and (e[4:].strip() in loaded or "load(" in e) for e in exprs):
            sums.add(var)
    if not sums:
        return Verdict(ok=False, reasons=["no sum of two loaded values"])
    stored = [c for c in k.calls_named("tl.store") if len(c.args) > 1 and set(_expand_names(k, c.args[1], 1)) & sums]
    reduced = [c for c in k.calls if c.name in _REDUCTIONS and set(c.depends_on) & sums]
    if stored and reduced:
        return Verdict(ok=True, lines=[stored[0].line, reduced[0].line],
                       reasons=[f"{'/'.join(sorted(sums))} (a sum of two loads) is stored (line {stored[0].line}) and reduced (line {reduced[0].line})"])
    return Verdict(ok=False, reasons=["the sum of two loads is not both stored and reduced"])


_EXP = [r"(.*[._])?(exp|exp2|expf|fast_expf|exp2f)"]


def _shift_of(k: KernelFacts, arg: str, depth: int = 2) -> bool:
    """An exponent `x - m` whose subtrahend is a max: from tl.max/tl.maximum, or named like one
    (a bare name is followed to its assignment: `d = x - m; exp(d)`)."""
    node = _parse(arg)
    if node is None:
        return False
    if isinstance(node, ast.Name) and node.id in k.assigns and depth > 0:
        return _shift_of(k, k.assigns[node.id][1], depth - 1)
    for sub in ast.walk(node):
        if isinstance(sub, ast.BinOp) and isinstance(sub.op, ast.Sub):
            right = ast.unparse(sub.right)
            if re.search(r"\btl\.(max|maximum)\(", right):
                return True
            for n in re.findall(r"[A-Za-z_]\w*", right):
                if k.origins.get(n) in ("tl.max", "tl.maximum", "tl.reduce") or re.fullmatch(r"(?i)(b_)?(m|mx|max\w*|\w*_max|m_\w+|lse\w*|\w*lse)", n):
                    return True
    return False


def _normalised_by_sum(k: KernelFacts, line: int) -> bool:
    """The exp assigned on `line` is divided by, or logged through, a tl.sum of itself (softmax, log-sum-exp)."""
    made = [v for v, (ln, _) in k.assigns.items() if ln == line]
    texts = [t for _, t in k.assigns.values()] + [a for c in k.calls for a in c.args]
    texts += [e.partition(":")[2] for exprs in k.accumulates.values() for e in exprs]
    for v in made:
        of_v = rf"tl\.sum\(\s*{re.escape(v)}\b"
        sums = {w for w, (_, t) in k.assigns.items() if re.search(of_v, t)}
        sums |= {w for w, exprs in k.accumulates.items() if any(re.search(of_v, e) for e in exprs)}
        for t in texts:
            for d in [of_v, *(rf"\b{re.escape(w)}\b" for w in sums)]:
                if re.search(rf"/\s*\(?\s*{d}", t) or re.search(rf"log2?\(\s*{d}", t):
                    return True
    return False


@predicate()
def exp_shift(s: Subject, *, shifted: bool, of_loaded: bool = True, normalised: bool = False) -> Verdict:
    """exp/exp2 calls whose exponent is (shifted) or is not `x - max`; of_loaded: only exponents of values the kernel loads; normalised: only exps divided by (or logged through) their own tl.sum, as in a softmax."""
    k = _kernel(s)
    loaded = set(k.loaded)
    hits = []
    for c in k.calls:
        if not _call_matches(c, _EXP) or not c.args:
            continue
        if of_loaded and not (set(c.depends_on) & loaded or "load(" in c.args[0]):
            continue
        if normalised and not _normalised_by_sum(k, c.line):
            continue
        if _shift_of(k, c.args[0]) == shifted:
            hits.append(c)
    return _hit(hits, "exp of x - max" if shifted else "exp of an unshifted value")


def _reduce_axis(c: CallSite) -> str:
    axis = c.kwargs.get("axis", c.args[1] if len(c.args) > 1 else "None")
    return axis.strip()


@predicate()
def rows_per_program(s: Subject, *, block_param: list[str]) -> Verdict:
    """Each program takes a [rows, cols] tile of rows (a program_id scaled by a row-block constexpr matching `block_param`) and reduces along the columns (axis 1 / -1), with no tl.dot: several short rows per program."""
    k = _kernel(s)
    if k.calls_named("tl.dot", "tl.dot_scaled"):
        return Verdict(ok=False, reasons=["a tl.dot kernel tiles rows for the MMA, not for short rows"])
    tiles = tiles_axis_by_program(s, block_param=block_param)
    if not tiles.ok:
        return tiles
    reds = [c for c in k.calls if c.name in _REDUCTIONS and _reduce_axis(c) in ("1", "-1")]
    if not reds:
        return Verdict(ok=False, reasons=["no reduction along axis 1 of a row tile"])
    return Verdict(ok=True, lines=[*tiles.lines, reds[0].line], reasons=[*tiles.reasons, f"reduces rows along axis 1 (line {reds[0].line})"])


# lengths that change from call to call (tokens, rows, batch), not model dimensions (heads, head dim, hidden)
_SIZE_NAMES = [r"(?i)(t|s|l|m|b|nt|bs|seq_?lens?|seqlen\w*|max_seq\w*|\w*_len|num_tokens|n_tokens|tokens|total_\w+|n_rows|rows|num_rows"
               r"|batch\w*|numel|n_elements?|num_elements|n_ctx|n_cols_varying)"]
_SHAPE_CALLS = ("tl.arange", "tl.zeros", "tl.full", "tl.reshape", "tl.static_range", "tl.make_block_ptr", "tl.view",
                "tl.broadcast_to", "tl.expand_dims", "tl.split", "tl.join", "tl.permute", "tl.trans", "tl.static_assert")


def bound_only_constexprs(k: KernelFacts, names: list[str] = _SIZE_NAMES) -> list[tuple[str, int]]:  # noqa: B006
    """(name, line) of tl.constexpr parameters used as loop bounds or mask limits and never as a block shape."""
    hits = []
    for p in k.params:
        if not p.constexpr or not _matches_any(p.name, names) or p.name in k.heuristics:
            continue
        pat = re.compile(rf"\b{re.escape(p.name)}\b")
        if any(pat.search(x) for x in k.heuristics.values()):
            continue
        shaped = [c for c in k.calls if c.name in _SHAPE_CALLS and any(pat.search(a) for a in [*c.args, *c.kwargs.values()])]
        shaped += [c for c in k.calls if c.name.endswith((".reshape", ".view")) and any(pat.search(a) for a in c.args)]
        if shaped or any(pat.search(lp.iter) for lp in k.loops if lp.kind == "tl.static_range"):
            continue
        # a size used in `if N > ...:` or `[None, :N]` slices cannot be told apart here: only loop bounds and masks count
        bounds = [lp for lp in k.loops if lp.kind in ("range", "tl.range") and pat.search(lp.iter)]
        masks = [c for c in k.calls if c.name in ("tl.load", "tl.store") and pat.search(c.kwargs.get("mask", ""))]
        if bounds or masks:
            hits.append((p.name, bounds[0].line if bounds else masks[0].line))
    return hits


@predicate()
def constexpr_only_bounds(s: Subject, *, names: list[str] = _SIZE_NAMES) -> Verdict:  # noqa: B006
    """A tl.constexpr parameter (matching `names`) used only as a loop bound or in comparisons and arithmetic, never as a block shape (tl.arange, tl.zeros, tl.full, static_range, reshape): a size that recompiles the kernel for every value and need not."""
    hits = bound_only_constexprs(_kernel(s), names)
    if hits:
        name, line = hits[0]
        return Verdict(ok=True, lines=[ln for _, ln in hits], reasons=[f"constexpr {name} is only a loop bound or mask limit (line {line}): one compile per value"])
    return Verdict(ok=False, reasons=["no constexpr used only as a bound"])


@predicate()
def serial_prefix_loop(s: Subject) -> Verdict:
    """A loop walks one element per iteration (no tl.arange block in it), adds each loaded value to a running total and stores the total every iteration: a prefix sum done serially."""
    k = _kernel(s)
    for lp in k.loops:
        if lp.kind == "tl.static_range":
            continue
        inside = [c for c in k.calls if lp.line in c.loops]
        if any(c.name == "tl.arange" for c in inside):
            continue
        block = {v for v, o in k.origins.items() if o == "tl.arange"}
        if any(c.name == "tl.load" and c.args and (_expand_names(k, c.args[0], 6) & block or "tl.arange" in c.args[0]) for c in inside):
            continue  # vector loads: each iteration already works on a block (a row loop)
        for var in lp.assigned:
            if var == lp.target:
                continue
            adds = [e for e in k.accumulates.get(var, []) if e.startswith("add:")]
            expr = k.assigns.get(var, (0, ""))[1]
            v = re.escape(var)
            self_add = bool(re.search(rf"\b{v}\s*\+|\+\s*{v}\b", expr))
            scaled = re.search(rf"\*\s*{v}\b|\b{v}\s*\*", expr) or "multiply" in {e.partition(":")[0] for e in k.accumulates.get(var, [])}
            if not (adds or self_add) or scaled:
                continue  # a decayed state (h = a * h + x) is a recurrence, not a prefix sum
            # the running total itself is stored, not something computed from it
            stores = [c for c in inside if c.name == "tl.store" and len(c.args) > 1
                      and re.fullmatch(rf"{v}(\.to\(.*\))?", c.args[1].strip())]
            loads = [c for c in inside if c.name == "tl.load"]
            if stores and loads and not (set(stores[0].depends_on) & block and "arange" in stores[0].args[0]):
                return Verdict(ok=True, lines=[lp.line, stores[0].line],
                               reasons=[f"loop at line {lp.line} adds one element to {var} and stores it each iteration (line {stores[0].line})"])
    return Verdict(ok=False, reasons=["no loop storing a running total element by element"])


@predicate()
def softplus_form(s: Subject, *, guarded: bool) -> Verdict:
    """log(1 + exp(x)) written inline, (guarded) inside a tl.where / clamp that returns x for large x, or (not guarded) bare: exp(x) overflows for x > 88 in fp32."""
    k = _kernel(s)
    hits = []
    texts = [(line, t) for line, t in k.assigns.values()] + [(c.line, a) for c in k.calls_named("tl.store") for a in c.args]
    seen_lines = set()
    for line, text in texts:
        if line in seen_lines:
            continue
        norm = text.replace(" ", "")
        # log(1 + exp(x)), log(exp(x) + 1), log1p(exp(x)), log2(1 + exp2(x))
        m_ = re.search(r"log(1p|2)?\((1(\.0?)?\+)?(tl\.(math\.)?)?exp2?\(", norm)
        if not m_:
            continue
        is_guarded = "where(" in norm or "minimum(" in norm or "maximum(" in norm
        if is_guarded == guarded:
            seen_lines.add(line)
            hits.append(line)
    if hits:
        return Verdict(ok=True, lines=sorted(hits), reasons=[("guarded" if guarded else "unguarded") + f" softplus log(1 + exp(x)) (line {hits[0]})"])
    return Verdict(ok=False, reasons=["no " + ("guarded" if guarded else "unguarded") + " log(1 + exp(x))"])


@predicate()
def short_constant_loop(s: Subject, *, max_trip: int = 16) -> Verdict:
    """A `range` loop whose bounds are literals or tl.constexpr parameters (at most max_trip iterations when literal): it could be unrolled with tl.static_range."""
    k = _kernel(s)
    consts = set(k.constexprs) | {n for n in s.file.constants}
    hits = []
    for lp in k.loops:
        if lp.kind not in ("range",) or not lp.args:
            continue
        names = set(re.findall(r"[A-Za-z_]\w*", " ".join(lp.args)))
        if names - consts:
            continue
        try:
            values = [int(eval(a, {"__builtins__": {}}, {})) for a in lp.args]  # noqa: S307 - literals only
        except Exception:
            values = None
        if values is not None:
            start, stop, step = (0, values[0], 1) if len(values) == 1 else (values[0], values[1], values[2] if len(values) > 2 else 1)
            if step <= 0 or (stop - start) // step > max_trip:
                continue
        hits.append(lp)
    if hits:
        return Verdict(ok=True, lines=[lp.line for lp in hits], reasons=[f"loop `{hits[0].iter}` has compile-time bounds (line {hits[0].line})"])
    return Verdict(ok=False, reasons=["no range loop with compile-time bounds"])


@predicate()
def masked_loop_loads(s: Subject, *, bound: list[str] | None = None) -> Verdict:
    """Loads in a loop whose mask depends on the loop index (the tail check `i + o < K` repeated on every tile); bound: only loops whose range names a runtime parameter matching these (model dimensions such as K, D, hidden, not token counts)."""
    k = _kernel(s)
    # a constexpr bound already tells the compiler whether the tail exists: only runtime bounds count
    params = {p.name for p in k.params if not p.constexpr}
    hits = []
    for lp in k.loops:
        if lp.kind == "tl.static_range":
            continue
        if bound is not None and not any(_matches_any(n, bound) for n in set(re.findall(r"[A-Za-z_]\w*", lp.iter)) & params):
            continue
        for c in k.calls:
            if c.name != "tl.load" or c.via or not c.loops or c.loops[-1] != lp.line:
                continue
            mask = c.kwargs.get("mask", c.args[1] if len(c.args) > 1 else "")
            if mask and lp.target and lp.target in _expand_names(k, mask, 2):
                hits.append(c)
    return _hit(hits, "masked tl.load whose mask moves with the loop index")


def _add_terms(node: ast.expr) -> list[ast.expr]:
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _add_terms(node.left) + _add_terms(node.right)
    return [node]


@predicate()
def indirect_offset_load(s: Subject) -> Verdict:
    """A block load whose address adds, unscaled, an element offset the kernel loaded (`x + start + o` with start from cu_seqlens or an index table): nothing tells the compiler that offset is aligned, so the load cannot vectorise."""
    k = _kernel(s)
    loaded = set(k.loaded)

    def lanes(text: str) -> bool:
        reach = _expand_names(k, text, 6)
        return "tl.arange" in text or any(k.origins.get(n) == "tl.arange" or "tl.arange" in k.assigns.get(n, (0, ""))[1] for n in reach)

    hits = []
    for c in k.calls_named("tl.load", "tl.store"):
        if not c.args or c.via:
            continue
        text = c.args[0].strip()
        if re.fullmatch(r"\w+", text) and text in k.assigns:
            text = k.assigns[text][1]
        node = _parse(text)
        if node is None or not lanes(text):
            continue
        terms = _add_terms(node)
        # a bare loaded name (or a parenthesised sum containing one) added to the address
        flat = [t for term in terms for t in _add_terms(term)]
        if any(isinstance(t, ast.Name) and t.id in loaded and k.origins.get(t.id) == "tl.load" for t in flat):
            hits.append(c)
    return _hit(hits, "block access at an unscaled offset loaded from memory")


@predicate()
def casts_loads(s: Subject, *, to: list[str] = ["tl.float32"]) -> Verdict:  # noqa: B006
    """The kernel casts values it loads to `to` (`tl.load(p).to(tl.float32)`): it reads the stored dtype and converts in registers."""
    k = _kernel(s)
    loaded = set(k.loaded)
    hits = []
    for v, (line, text) in k.assigns.items():
        m_ = re.search(r"\.to\(\s*([\w.]+)", text)
        if m_ and m_.group(1) in to and ("load(" in text or v in loaded):
            hits.append(line)
    if hits:
        return Verdict(ok=True, lines=sorted(hits), reasons=[f"loads cast to {'/'.join(to)} in the kernel (line {min(hits)})"])
    return Verdict(ok=False, reasons=["no load cast in the kernel"])

@predicate()
def runtime_loop_bound(s: Subject) -> Verdict:
    """A range loop's bound is a runtime (non-constexpr) parameter of the kernel: one compiled kernel serves every length."""
    k = _kernel(s)
    runtime = {p.name for p in k.params if not p.constexpr}
    hits = [lp for lp in k.loops if lp.kind in ("range", "tl.range", "while")
            and set(re.findall(r"[A-Za-z_]\w*", " ".join(lp.args[:2]) or lp.iter)) & runtime]
    if hits:
        return Verdict(ok=True, lines=[lp.line for lp in hits], reasons=[f"loop `{hits[0].iter}` runs to a runtime length (line {hits[0].line})"])
    return Verdict(ok=False, reasons=["no loop bounded by a runtime parameter"])

@predicate()
def optional_operand_flag(s: Subject) -> Verdict:
    """A tl.constexpr flag set from whether an operand is given (`HAS_BIAS=bias is not None` at the launch, or in @triton.heuristics): the kernel is compiled with and without the operand."""
    k = _kernel(s)
    none_test = re.compile(r"\bis\s+(not\s+)?None\b")
    for name, text in k.heuristics.items():
        if none_test.search(text):
            return Verdict(ok=True, lines=[k.line], reasons=[f"@triton.heuristics sets {name} from `{' '.join(text.split())[:50]}`"])
    constexprs = set(k.constexprs)
    for la in k.launches:
        for _pos, name, text in _launch_sources(s, la):
            if name in constexprs and none_test.search(text):
                return Verdict(ok=True, lines=[la.line], reasons=[f"launch sets {name} = `{' '.join(text.split())[:50]}` (line {la.line})"])
    return Verdict(ok=False, reasons=["no constexpr flag for an optional operand"])

@predicate()
def chunked_row_loop(s: Subject) -> Verdict:
    """A loop walks a runtime length in steps of a tl.constexpr block (`range(0, D, BLOCK)`) and reduces what it loads there (tl.sum/max/min or `acc +=`): a row tiled in fixed-size chunks instead of one block the width of the row."""
    k = _kernel(s)
    runtime = {p.name for p in k.params if not p.constexpr}
    consts = set(k.constexprs)
    for lp in k.loops:
        if lp.kind not in ("range", "tl.range") or len(lp.args) < 3:
            continue
        if not (set(re.findall(r"[A-Za-z_]\w*", lp.args[1])) & runtime) or not (set(re.findall(r"[A-Za-z_]\w*", lp.args[2])) & consts):
            continue
        inside = [c for c in k.calls if lp.line in c.loops]
        if any(_called(c, ("tl.dot",)) for c in inside):
            continue  # a GEMM's K loop, not a row
        reduces = any(c.name in _REDUCTIONS for c in inside) or any(v in k.accumulates for v in lp.assigned)
        if reduces and any(c.name == "tl.load" for c in inside):
            return Verdict(ok=True, lines=[lp.line], reasons=[f"loop `{lp.iter}` reduces the row in chunks (line {lp.line})"])
    return Verdict(ok=False, reasons=["no loop reducing a row in constexpr-sized chunks"])

# ======================================================================================
# end of the p14a block
# ======================================================================================

# --------------------------------------------------------------------------------------
# p14b (issue #14): attention, linear attention, quantization, MoE. Structural
# readings of index arithmetic: which address derives from which load, which
# loop bound follows the query tile, which value is unpacked or scaled.
# --------------------------------------------------------------------------------------

_NAME = re.compile(r"\b[A-Za-z_]\w*\b")


def _reach(k: KernelFacts, text: str, depth: int = 6) -> set[str]:
    """Names an expression reads, followed through the kernel's assignments (last assignment of each name)."""
    seen: set[str] = set()
    frontier = set(_NAME.findall(text))
    for _ in range(depth):
        new = set()
        for n in frontier - seen:
            seen.add(n)
            if n in k.assigns:
                new |= set(_NAME.findall(k.assigns[n][1]))
        frontier = new
    return seen | frontier


def _expanded(k: KernelFacts, text: str, depth: int = 3) -> str:
    """The expression with assigned names replaced by their (last) values, for reading its form."""
    for _ in range(depth):
        text = _NAME.sub(lambda mo: f"({k.assigns[mo.group(0)][1]})" if mo.group(0) in k.assigns and "program_id" not in k.assigns[mo.group(0)][1] else mo.group(0), text)
    return text


def _dot_loops(k: KernelFacts) -> list:
    return [lp for lp in k.loops if any(lp.line in c.loops and _called(c, ("tl.dot",)) for c in k.calls)]


def _loop_end(lp) -> str:
    return lp.args[1] if len(lp.args) >= 2 else (lp.args[0] if lp.args else "")


@predicate()
def causal_loop_bound(s: Subject) -> Verdict:
    """A tl.dot loop over key tiles whose end follows the query tile (`(i_m + 1) * BM`, `i_m * BM + BM`, `i_t * BT`): tiles past the diagonal are never visited."""
    k = _kernel(s)
    pid = {v for v, axes in k.pid_deps.items() if axes and v in k.assigns and "load" not in k.assigns[v][1]}
    for lp in _dot_loops(k):
        end = _expanded(k, _loop_end(lp))
        for mo in re.finditer(r"\(\s*(\w+)\s*\+\s*1\s*\)\s*\*\s*(\w+)|\b(\w+)\s*\*\s*(\w+)\s*\+\s*(\w+)|\b(\w+)\s*\*\s*(\w+)", end):
            x, c = (mo.group(1), mo.group(2)) if mo.group(1) else ((mo.group(3), mo.group(4)) if mo.group(3) else (mo.group(6), mo.group(7)))
            if mo.group(3) and mo.group(5) != c:
                continue
            if x in pid and c in k.constexprs:
                return Verdict(ok=True, lines=[lp.line], reasons=[f"key loop at line {lp.line} ends at the query tile: `{lp.iter}`"])
    return Verdict(ok=False, reasons=["no tl.dot loop bounded by the query tile"])


@predicate()
def causal_mask(s: Subject) -> Verdict:
    """Inside a tl.dot loop, a mask compares a program-dependent row offset with a loop-dependent column offset (`o_m[:, None] >= o_n[None, :]`): a causal (triangular) mask."""
    k = _kernel(s)
    rx = re.compile(r"(\w+)\s*\[\s*:\s*,\s*None\s*\]\s*(>=|>|<=|<)\s*\(?\s*([\w\s+]+?)\s*\)?\s*\[\s*None\s*,\s*:\s*\]")
    for lp in _dot_loops(k):
        texts = [(c.line, a) for c in k.calls if lp.line in c.loops and c.name == "tl.where" for a in c.args[:1]]
        texts += [(line, e) for v, (line, e) in k.assigns.items() if lp.line <= line <= lp.end_line]
        for line, text in texts:
            for mo in rx.finditer(text):
                row, col = mo.group(1), mo.group(3)
                col_names = set(_NAME.findall(col))
                if k.pid_deps.get(row) and row not in lp.assigned and col_names & set(lp.assigned):
                    return Verdict(ok=True, lines=[line], reasons=[f"causal mask `{mo.group(0)}` in the loop at line {lp.line} (line {line})"])
    return Verdict(ok=False, reasons=["no row-versus-column mask in a tl.dot loop"])


def _raw_pair_loads(k: KernelFacts) -> list[tuple[CallSite, CallSite, str, str]]:
    """(first, second, base, index) for loads `P + i` and `P + i + 1` of one pointer: CSR row bounds, (seq, chunk) pairs."""
    loads = [c for c in k.calls if c.name == "tl.load" and c.args]
    norm = {id(c): " ".join(c.args[0].split()) for c in loads}
    out = []
    for a in loads:
        mo = re.fullmatch(r"\(?\s*(\w+)\s*\+\s*(.+?)\s*\)?", norm[id(a)])
        if not mo:
            continue
        base, idx = mo.group(1), mo.group(2)
        if base not in {p.name for p in k.params}:
            continue
        for b in loads:
            t = norm[id(b)]
            if b is not a and t.replace(" ", "") in (f"{base}+{idx}+1".replace(" ", ""), f"{base}+({idx}+1)".replace(" ", "")):
                out.append((a, b, base, idx))
    return out


def _segment_pairs(k: KernelFacts) -> list[tuple[CallSite, CallSite, str, str]]:
    """The pair loads that are one segment's bounds."""
    out = _raw_pair_loads(k)
    # bounds of one segment: a scalar index (no tl.arange behind it), and the two values used
    # together (eos - bos, range(bos, eos), a mask against both), not two neighbours of a vector
    keep = []
    for a, b, base, idx in out:
        if any("tl.arange" in k.assigns.get(n, (0, ""))[1] for n in _reach(k, idx)) or "tl.arange" in idx:
            continue
        names = [next((v for v, (line, e) in k.assigns.items() if line == c.line and f"{base} +" in e.replace("(", "") and
                       " ".join(e.split()).find(" ".join(c.args[0].split())) >= 0), None) for c in (a, b)]
        if None in names or names[0] == names[1]:
            keep.append((a, b, base, idx))  # reassigned on another branch (`else: bos = i_n * T`): the scalar index decides
            continue
        texts = [e for v, (line, e) in k.assigns.items() if line not in (a.line, b.line)]
        texts += [lp.iter for lp in k.loops] + [x for c in k.calls if c.line not in (a.line, b.line) for x in c.args]
        if any({names[0], names[1]} <= _reach(k, t) for t in texts):
            keep.append((a, b, base, idx))
    return keep


@predicate()
def offset_pair_load(s: Subject, *, index_addresses_dot_operand: bool | None = None) -> Verdict:
    """Loads `P[i]` and `P[i + 1]` of one pointer parameter (segment bounds from an offsets table: cu_seqlens, expert offsets).

    index_addresses_dot_operand: the segment index itself (not only the bounds) addresses an operand loaded in a tl.dot loop, as a group's weight in a grouped GEMM."""
    k = _kernel(s)
    pairs = _segment_pairs(k)
    if index_addresses_dot_operand is not None:
        loops = {lp.line for lp in _dot_loops(k)}
        keep = []
        for a, b, base, idx in pairs:
            names = set(_NAME.findall(idx))
            # and values read through the same index (`w_index = tl.load(weight_indices + pid_s)`)
            names |= {v for v, (_, e) in k.assigns.items() if "tl.load" in e and set(_NAME.findall(e)) & names and base not in _NAME.findall(e)}
            params = {p.name for p in k.params}

            def group_base(text: str) -> bool:
                """`w + g * stride + ...`: the index picks a pointer parameter's slab (a group's weight)."""
                text = k.assigns[text.strip()][1] if text.strip() in k.assigns else text  # p_w = w + g * N * K; tl.load(p_w)
                flat = text.replace("(", " ").replace(")", " ")
                return any(mo.group(1) in params and mo.group(2) in names
                           for mo in re.finditer(r"\b(\w+)\s*\+\s*(\w+)(?:\.to\s*tl\.int64\s*)?\s*\*", flat))

            used = any(c.name == "tl.load" and c.args and set(c.loops) & loops and group_base(c.args[0]) for c in k.calls)
            if used == index_addresses_dot_operand:
                keep.append((a, b, base, idx))
        pairs = keep
    if pairs:
        a, b, base, idx = pairs[0]
        return Verdict(ok=True, lines=[a.line, b.line], reasons=[f"segment bounds {base}[{idx}] and {base}[{idx} + 1] (line {a.line})"])
    return Verdict(ok=False, reasons=["no load of P[i] and P[i + 1] from an offsets table"])


@predicate()
def gathered_access(
    s: Subject,
    *,
    op: Literal["load", "store"] = "load",
    in_loop: bool | None = None,
    index_loaded_in_loop: bool | None = None,
    vector_index: bool | None = None,
    computed_value: bool | None = None,
) -> Verdict:
    """A load or store whose address derives from a value the kernel loaded from another pointer (a page table, slot mapping, sorted token ids): an indexed gather or scatter.

    index_loaded_in_loop: the index is loaded in the same loop as the access (per tile) or outside it;
    vector_index: the index is a vector (its own address uses tl.arange), not one scalar per program;
    computed_value (stores): the stored value is computed in the kernel (arithmetic or math on loads), not a copy."""
    k = _kernel(s)
    index_loads = {}
    for c in k.calls:
        if c.name == "tl.load" and c.args and not c.via:
            for v, (line, e) in k.assigns.items():
                if line == c.line and "tl.load" in e:
                    index_loads.setdefault(v, c)
    # values read from a segment or chunk table (cu_seqlens, chunk_indices) locate a whole segment, not one gathered row
    pair_lines = {x.line for a, b, _, _ in _raw_pair_loads(k) for x in (a, b)}
    index_loads = {v: c for v, c in index_loads.items() if c.line not in pair_lines}
    hits = []
    for c in k.calls:
        if c.name != f"tl.{op}" or not c.args or c.via:
            continue
        if in_loop is not None and c.in_loop != in_loop:
            continue
        if computed_value is not None and op == "store":
            value = c.args[1] if len(c.args) > 1 else c.kwargs.get("value", "")
            value = k.assigns[value.strip()][1] if value.strip() in k.assigns else value
            value = re.sub(r"\.to\([^()]*(\([^()]*\))?[^()]*\)", "", value)
            if bool(re.search(r"\w\s*[-+*/]\s*\w|tl\.(exp2?|log2?|sqrt|rsqrt|sigmoid|fma|dot|sum|max)\b", value)) != computed_value:
                continue
        names = _reach(k, c.args[0])
        if "tl.arange" not in c.args[0] and not any("tl.arange" in k.assigns.get(n, (0, ""))[1] or k.origins.get(n) == "tl.arange" for n in names):
            continue  # a scalar lookup (a table read through another table), not a tile gathered through one
        for v in sorted(names & set(index_loads)):
            src = index_loads[v]
            if src is c or src.args[0] == c.args[0]:
                continue
            if index_loaded_in_loop is not None and c.loops and (c.loops[-1] in src.loops) != index_loaded_in_loop:
                continue
            if vector_index is not None:
                aranged = any("tl.arange" in k.assigns.get(n, (0, ""))[1] for n in _reach(k, src.args[0])) or "tl.arange" in src.args[0]
                if aranged != vector_index:
                    continue
            hits.append((c, v, src))
            break
    if hits:
        c, v, src = hits[0]
        return Verdict(ok=True, lines=[src.line, c.line], reasons=[f"tl.{op} at line {c.line} addressed through {v} = `{_code(src, 40)}` (line {src.line})"])
    return Verdict(ok=False, reasons=[f"no tl.{op} addressed through a loaded index"])


@predicate()
def nibble_unpack(s: Subject, *, in_dot_loop: bool | None = None) -> Verdict:
    """Packed sub-byte values unpacked from a loaded word with a shift and a mask (`(w >> s) & 0xF`), optionally inside a tl.dot loop (dequantized on the fly)."""
    k = _kernel(s)
    rx = re.compile(r">>.*&\s*(0x0?[fF]|15|0x[fF]{2}|255|0x3|3)\b|&\s*(0x0?[fF]|15)\b.*>>")
    loops = {lp.line: lp for lp in _dot_loops(k)}
    for v, (line, e) in k.assigns.items():
        if not rx.search(e) or not (_reach(k, e) & set(k.loaded) or "tl.load" in e):
            continue
        inside = any(lp.line <= line <= lp.end_line for lp in loops.values())
        if in_dot_loop is not None and inside != in_dot_loop:
            continue
        return Verdict(ok=True, lines=[line], reasons=[f"unpacks {v} = `{' '.join(e.split())[:50]}` (line {line})"])
    # the unpacked value reassigned later (`b = (b >> s) & 0xF; b = (b - z) * scale`): the nibble
    # shift table `(o_k % 2) * 4` (or % 8) that a tl.dot in a loop depends on
    shifters = {v: line for v, (line, e) in k.assigns.items() if re.fullmatch(r"\(?\s*[\w\[\]:, ]+%\s*(2|8)\s*\)?\s*\*\s*4", e.strip())}
    for c in k.calls:
        if in_dot_loop is not False and c.name == "tl.dot" and c.loops and set(c.depends_on) & set(shifters):
            v = sorted(set(c.depends_on) & set(shifters))[0]
            return Verdict(ok=True, lines=[shifters[v], c.line], reasons=[f"tl.dot at line {c.line} uses nibbles shifted by {v} = `{k.assigns[v][1]}` (line {shifters[v]})"])
    return Verdict(ok=False, reasons=["no shift-and-mask unpacking of a loaded word" + (" in a tl.dot loop" if in_dot_loop else "")])


@predicate()
def group_absmax_scale(s: Subject) -> Verdict:
    """A scale is computed from the block's own absmax (`tl.max(tl.abs(x))`) and stored with a plain store, beside values divided (or multiplied) by it: one scale per block, from the registers it quantizes."""
    k = _kernel(s)
    if any(c.name.startswith("tl.atomic_") for c in k.calls):
        return Verdict(ok=False, reasons=["the absmax is combined across programs with atomics"])
    amax = {v for v, (_, e) in k.assigns.items() if re.search(r"tl\.max\(\s*tl\.abs\(", e) or re.search(r"tl\.max\(\s*tl\.abs\(", _expanded(k, e, 1))}
    if not amax:
        return Verdict(ok=False, reasons=["no absmax of a block"])
    scales = {v for v, (_, e) in k.assigns.items() if v in amax or set(_NAME.findall(e)) & amax}
    stores = [c for c in k.calls if c.name == "tl.store" and len(c.args) >= 2]
    scale_store = [c for c in stores if set(_NAME.findall(c.args[1])) & scales and not re.search(r"[*/]", c.args[1])]
    scaled = [c for c in stores if re.search(r"[*/]", _expanded(k, c.args[1], 2)) and _reach(k, c.args[1]) & scales]
    if scale_store and scaled:
        return Verdict(ok=True, lines=sorted({scale_store[0].line, scaled[0].line}),
                       reasons=[f"scale from the block's absmax stored at line {scale_store[0].line}, scaled values at line {scaled[0].line}"])
    return Verdict(ok=False, reasons=["absmax computed but no scale stored beside the scaled values"])


@predicate()
def topk_by_repeated_max(s: Subject) -> Verdict:
    """A loop that loads nothing and takes an argmax of a block and masks the winner out (`tl.where(idx == best, -inf, x)`): top-k selection in registers."""
    k = _kernel(s)
    for lp in k.loops:
        inside = [c for c in k.calls if lp.line in c.loops]
        if any(c.name == "tl.load" for c in inside):
            continue  # selection over values already in registers (storing each winner is fine)
        if any(c.name in ("tl.argmax", "tl.argmin") for c in inside) and any(c.name == "tl.where" for c in inside):
            return Verdict(ok=True, lines=[lp.line], reasons=[f"top-k by repeated max in registers (loop at line {lp.line})"])
    return Verdict(ok=False, reasons=["no register loop of max-and-mask"])


@predicate()
def state_in_out(s: Subject) -> Verdict:
    """A state carried across a loop (a recurrence) starts from memory (`b_h += tl.load(h0 ...)` before the loop) and is stored after it: the kernel continues from an initial state and hands its final state on."""
    k = _kernel(s)
    rec = recurrence_state(s)
    if not rec.ok:
        return Verdict(ok=False, reasons=rec.reasons)
    for lp in k.loops:
        for var in lp.assigned:
            if var == lp.target:
                continue
            loads_in = any(e.startswith("add:") and "tl.load" in e for e in k.accumulates.get(var, []))
            stores_out = [c for c in k.calls if c.name == "tl.store" and not c.loops and c.line > lp.end_line and len(c.args) >= 2
                          and re.search(rf"\b{re.escape(var)}\b", c.args[1])]
            if loads_in and stores_out:
                return Verdict(ok=True, lines=[stores_out[0].line],
                               reasons=[f"state {var} starts from a load and is stored after the loop at line {lp.line} (line {stores_out[0].line})"])
    return Verdict(ok=False, reasons=["the recurrent state neither starts from memory nor is stored after the loop"])


@predicate()
def partial_row_stats(s: Subject) -> Verdict:
    """A running max and a sum of exponentials are stored as partials, at an address over two program axes (row and split): a split reduction waiting for a merge."""
    k = _kernel(s)
    maxes = {v for v, (_, e) in k.assigns.items() if "tl.max(" in e}
    sums = {v for v, (_, e) in k.assigns.items() if "tl.sum(" in e and ("exp" in e or "exp" in _expanded(k, e, 1))}

    def split_store(names: set[str]) -> CallSite | None:
        for c in k.calls:
            if c.name == "tl.store" and len(c.args) >= 2 and c.args[1].strip() in names:
                axes = {a for n in _reach(k, c.args[0]) for a in k.pid_deps.get(n, [])}
                if len(axes) >= 2:
                    return c
        return None

    a, b = split_store(maxes), split_store(sums)
    if a and b:
        return Verdict(ok=True, lines=sorted({a.line, b.line}), reasons=[f"partial max and sum-exp stored per (row, split) (lines {a.line}, {b.line})"])
    return Verdict(ok=False, reasons=["no partial max and sum-exp stored per program pair"])



_CONTRACTIONS = ("tl.sum", "tl.max", "tl.min", "tl.reduce", "tl.xor_sum", "tl.dot", "tl.dot_scaled", "tl.cumsum")


def _elementwise_of_load(k: KernelFacts, text: str, depth: int = 4) -> bool:
    """The expression is an element-wise function of loaded values: a load is reached without passing
    through a reduction or dot (whose result is a new quantity, e.g. attention scores q·k) or a where's mask."""
    tree = _parse(text)
    if tree is None:
        return False
    todo: list[ast.expr] = [tree]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Call):
            name = ast.unparse(node.func)
            if name in _CONTRACTIONS:
                continue
            if name == "tl.load" or name.endswith(".load"):
                return True
            if name == "tl.where":
                todo += node.args[1:]  # the values, not the condition (a mask may read a loaded length)
                continue
            todo += [node.func, *node.args]
            continue
        if isinstance(node, ast.Name):
            if node.id in k.assigns and depth > 0 and _elementwise_of_load(k, k.assigns[node.id][1], depth - 1):
                return True
            continue
        todo += list(ast.iter_child_nodes(node))
    return False


@predicate()
def max_of_loaded_row(s: Subject) -> Verdict:
    """A tl.max in a loop reduces loaded values themselves (through element-wise steps only): a row reduction,
    not a max over values another reduction produced (the q·k scores of attention)."""
    k = _kernel(s)
    hits = [c for c in k.calls_named("tl.max") if c.loops and c.args and _elementwise_of_load(k, c.args[0])]
    if hits:
        return Verdict(ok=True, lines=[c.line for c in hits], reasons=[f"`{_code(hits[0], 40)}` reduces loaded values (line {hits[0].line})"])
    return Verdict(ok=False, reasons=["no tl.max in a loop over loaded values themselves"])


_WORD = re.compile(r"\w+")


def _int64_names(k: KernelFacts) -> set[str]:
    """Variables holding int64 values: cast with .to(tl.int64), or computed from one that is."""
    wide: set[str] = set()
    # `\bw\b` finds a name made of word characters exactly where it is one of the text's maximal
    # runs of word characters: a set lookup per assignment instead of a regex per known name
    words = {var: set(_WORD.findall(text)) for var, (_, text) in k.assigns.items()}
    for _ in range(4):  # through a few levels of assignments
        odd = [w for w in wide if not _WORD.fullmatch(w)]
        for var, (_, text) in k.assigns.items():
            if "int64" in text or not wide.isdisjoint(words[var]) or any(re.search(rf"\b{re.escape(w)}\b", text) for w in odd):
                wide.add(var)
                if not _WORD.fullmatch(var):
                    odd.append(var)
    return wide


def _pid_memo(k: KernelFacts, wide: set[str]) -> tuple[dict, set[str]]:
    # program ids and pure index arithmetic on them (`i_bh // H`), not the tile offsets built with tl.arange
    return {}, {v for v, axes in k.pid_deps.items() if axes and v not in wide and "tl.arange" not in k.assigns.get(v, (0, ""))[1]
                and not k.assigns.get(v, (0, ""))[1].startswith("tl.load")}


def _int32_pid_products(k: KernelFacts, text: str, wide: set[str], runtime: set[str], depth: int = 4,
                        memo: tuple[dict, set[str]] | None = None) -> list[str]:
    """`a * b` terms of an address where one side is an int32 program id and the other reads a runtime value.

    `memo` (_pid_memo(k, wide), one for the same k, wide and runtime) keeps each expression's
    answer: the addresses of a kernel share their index variables, which are followed again otherwise."""
    done, pids = memo if memo is not None else _pid_memo(k, wide)
    got = done.get((text, depth))
    if got is not None:
        return got
    done[(text, depth)] = out = []
    tree = _parse(text)
    if tree is None:
        return out

    def narrow_pid(node: ast.expr) -> bool:
        for n in ast.walk(node):
            if isinstance(n, ast.Name) and n.id in pids:
                return True
            if isinstance(n, ast.Call) and ast.unparse(n.func) == "tl.program_id" and "int64" not in ast.unparse(node):
                return True
        return False

    def reads_runtime(node: ast.expr) -> bool:
        return any(isinstance(n, ast.Name) and n.id in runtime for n in ast.walk(node))

    for n in ast.walk(tree):
        if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mult):
            if (narrow_pid(n.left) and reads_runtime(n.right)) or (narrow_pid(n.right) and reads_runtime(n.left)):
                out.append(ast.unparse(n))
        elif isinstance(n, ast.Name) and depth and n.id in k.assigns and n.id not in pids:
            # through the assignment, even of an int64 value: `(i_b * T + i_t) * H + i_h` multiplies in int32
            # before the int64 i_h joins
            out += _int32_pid_products(k, k.assigns[n.id][1], wide, runtime, depth - 1, memo)
    return out


@predicate()
def int32_pid_offsets(s: Subject, *, min_count: int = 1) -> Verdict:
    """A load or store address multiplies a program id that is still int32 by a runtime value (`i_b * T * D`,
    `pid * stride`): past 2^31 elements the product wraps and the address goes negative. Program ids cast with
    `.to(tl.int64)`, and values computed from them, are int64."""
    k = _kernel(s)
    wide = _int64_names(k)
    runtime = {p.name for p in k.params if not p.constexpr}
    hits = []
    memo = _pid_memo(k, wide)
    for c in k.calls:
        if c.name in ("tl.load", "tl.store") or c.name.startswith("tl.atomic_"):
            address = c.args[0] if c.args else c.kwargs.get("pointer", "")
            if _int32_pid_products(k, address, wide, runtime, 4, memo):
                hits.append(c)
    return _hit(hits, "address with an int32 program id times a runtime stride", min_count)
