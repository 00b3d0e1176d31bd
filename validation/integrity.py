"""Integrity: reject a candidate that gets the right numbers the wrong way.

Static checks (static.py) read the source; the runtime checks here run the
candidate on the op's first shape, dtype and seed, each against a local
expectation:

- monitor: while it runs, the candidate launches a Triton kernel, calls no
  torch op the baseline does not (outside allocation and views), starts no
  thread, creates no stream, patches no timer (also checked at import), and
  every launch stays within the declared resource limits;
- unwritten / uninitialised: outputs poisoned with NaN and then with 1024.0;
  an element equal to the poison both times was never written, one that
  differs between the two runs was computed from uninitialised memory;
- cache probes: new tensors of the same shape, then the same tensors (same
  data_ptr) with new contents, must give the new reference result, not the old;
- perturbation: each sensitive input perturbed in turn; wherever the reference
  output changes, the candidate's must change too (and match the reference);
- fresh shape: a shape drawn now beside the grid, held to the tolerance and to
  the precision bound of the op's accumulation (as correctness.py holds the grid).
"""
from __future__ import annotations

import math
from typing import Any, Callable

import torch

from patterns.core.records import CheckResult
from patterns.validation.loader import Impl
from patterns.validation.monitor import Observed
from patterns.validation.runner import (
    Result,
    active_dtypes,
    call,
    call_reference,
    clone_inputs,
    collect,
    first_mismatch,
    precise_result,
    precision_mismatch,
    shape_label,
    tolerances,
)
from patterns.core.opspec import Inputs, OpSpec, Tolerance
from patterns.validation.static import ALLOWED_TORCH, limit_names, static_checks

POISON = 1024.0  # exact in every float dtype; far from typical outputs

# torch calls at run time that allocate, describe or view; anything else computes
ALLOWED_METHODS = {
    "size", "stride", "dim", "ndimension", "numel", "nelement", "data_ptr", "is_contiguous", "contiguous",
    "view", "view_as", "reshape", "reshape_as", "expand", "expand_as", "permute", "transpose", "t",
    "unsqueeze", "squeeze", "flatten", "unflatten", "narrow", "__getitem__", "__setitem__", "split", "chunk",
    "unbind", "as_strided", "element_size", "storage_offset", "untyped_storage", "new_empty", "new_zeros",
    "new_ones", "new_full", "new_tensor", "to", "float", "half", "bfloat16", "double", "int", "long", "type",
    "fill_", "zero_", "copy_", "__len__", "is_floating_point", "is_complex", "get_device", "__index__",
    "__int__", "__float__", "__bool__", "item", "__format__", "__repr__", "detach", "clone", "movedim",
    "requires_grad_", "dim_order", "cuda", "cpu",
}


def check_integrity(
    spec: OpSpec,
    baseline: Impl,
    candidate: Impl,
    reference: Callable[..., Any],
    device: str,
    imported: dict[str, Observed],
) -> list[CheckResult]:
    checks = static_checks(spec, baseline, candidate)
    dtype, shape, seed = active_dtypes(spec, device)[0], dict(spec.shapes[0]), spec.seeds[0]
    tol = spec.tolerance[dtype]
    label = shape_label(shape, dtype)
    inputs = spec.make_inputs(dict(shape), dtype, seed, device)
    want = call_reference(spec, reference, inputs)

    base_obs, cand_obs = Observed(), Observed()
    probes: list[CheckResult] = []
    try:
        call(spec, baseline, inputs, device, observe=base_obs)
        probes.append(_unwritten(spec, candidate, inputs, want, device, label, cand_obs))
        other = spec.make_inputs(dict(shape), dtype, seed + 1000, device)
        probes.append(_cache_probe(spec, candidate, reference, inputs, other, tol, device, label, cand_obs))
        probes += _perturbation(spec, candidate, reference, inputs, want, tol, device, label, cand_obs)
        probes.append(_memo_probe(spec, baseline, candidate, inputs, device, label))
        probes.append(_fresh_shape(spec, baseline, candidate, reference, dtype, device))
        probes += _non_default_args(spec, baseline, candidate, reference, inputs, dtype, device, label)
        probes.append(_launch_inputs(spec, base_obs, cand_obs))
    except Exception as e:  # noqa: BLE001 - a crash is a local failure, not a gate crash
        probes.append(CheckResult(name="runtime", layer="integrity", passed=False, reason=f"integrity: candidate raised {type(e).__name__}: {e} ({label})", shape={**shape, "dtype": dtype}))
    checks += _monitor(spec, base_obs, cand_obs, imported, label)
    for c in probes:
        c.shape = c.shape or {**shape, "dtype": dtype}
    return checks + probes


# -- what the candidate cannot see coming -----------------------------------------------------


def _memo_probe(spec: OpSpec, baseline: Impl, candidate: Impl, inputs: Inputs, device: str, label: str) -> CheckResult:
    """The same inputs twice: a call that launches fewer kernels the second time (and the baseline
    does not) returned a memoised result, which is what the timed runs, all on one input, would time."""
    counts = {}
    for impl in (baseline, candidate):
        per_call = []
        for _ in range(2):
            obs = Observed()
            call(spec, impl, inputs, device, observe=obs)
            per_call.append(len(obs.launches))
        counts[impl.role] = per_call
    (b1, b2), (c1, c2) = counts["baseline"], counts["candidate"]
    if (c2 < c1 and b2 >= b1) or (c2 == 0 and b2 > 0):  # an earlier probe may have filled the memo already
        return _fail("memoisation", f"integrity: result memoised (the same inputs again: {c2} launch(es) instead of {c1}; {label})")
    return CheckResult(name="memoisation", layer="integrity", passed=True, reason="integrity: a repeated call launches its kernels again", details=counts)


def _fresh_shape(spec: OpSpec, baseline: Impl, candidate: Impl, reference: Callable[..., Any], dtype: str, device: str) -> CheckResult:
    """A shape drawn now, each size within the range the spec's grid spans (odd where it can be):
    a candidate correct only on the declared shapes fails here. A draw the baseline cannot run, or
    gets wrong, is not the candidate's fault: another is drawn (up to 8)."""
    import random

    rng = random.Random()  # unseeded: fresh every validation
    names = list(spec.shapes[0])
    # the grid's range of each size, widened by half on each side (a one-shape grid still varies)
    spans = {n: (max(1, lo - lo // 2), hi + hi // 2) for n in names for lo, hi in [(min(s[n] for s in spec.shapes), max(s[n] for s in spec.shapes))]}
    for _ in range(8):
        base = dict(rng.choice(spec.shapes))
        # every size that can change does, to a value none of the grid's shapes has
        shape = {}
        for (n, (lo, hi)), v in zip(spans.items(), base.values()):
            taken = {s[n] for s in spec.shapes}
            choices = [x for x in range(lo, hi + 1) if x not in taken and (x % 2 or hi - lo < 4)]
            shape[n] = rng.choice(choices) if choices else v
        shape = {n: min(max(v, spans[n][0]), spans[n][1]) for n, v in shape.items()}
        if shape in [dict(s) for s in spec.shapes]:
            continue
        try:
            inputs = spec.make_inputs(dict(shape), dtype, rng.randrange(1 << 30), device)
            want = call_reference(spec, reference, inputs)
            precise = precise_result(spec, reference, inputs)
            per_output = tolerances(spec, want, dtype)
            terms = spec.reduction_length(shape)
            got_b, _ = call(spec, baseline, inputs, device)
            if first_mismatch(got_b, want, per_output) is not None:
                continue
            if precise is not None and precision_mismatch(got_b, precise, want, spec.accumulation, terms, dtype)[1] is not None:
                continue
        except Exception:  # noqa: BLE001 - the op does not take this shape
            continue
        label = shape_label(shape, dtype)
        try:
            got, _ = call(spec, candidate, inputs, device)
            bad = first_mismatch(got, want, per_output)
            # precision too: a candidate accumulating in fp32 only on the grid's shapes fails here
            if bad is None and precise is not None:
                excess = precision_mismatch(got, precise, want, spec.accumulation, terms, dtype)[1]
                if excess is not None:
                    reason = f"integrity: beyond {spec.accumulation} accumulation at a shape drawn now ({excess.describe()}; {label})"
                    return CheckResult(name="fresh shape", layer="integrity", passed=False, reason=reason, shape={**shape, "dtype": dtype})
        except Exception as e:  # noqa: BLE001
            return CheckResult(name="fresh shape", layer="integrity", passed=False, reason=f"integrity: fails at a shape drawn now (raised {type(e).__name__}: {e}; {label})", shape={**shape, "dtype": dtype})
        if bad is not None:
            return CheckResult(name="fresh shape", layer="integrity", passed=False, reason=f"integrity: wrong at a shape drawn now, beside the spec's grid ({bad.describe()}; {label})", shape={**shape, "dtype": dtype})
        return CheckResult(name="fresh shape", layer="integrity", passed=True, reason=f"integrity: right at a shape drawn now ({label})", shape={**shape, "dtype": dtype})
    return CheckResult(name="fresh shape", layer="integrity", passed=None, reason="integrity: fresh shape not run (no shape drawn within the grid's ranges that the baseline runs right)")


def _non_default_args(
    spec: OpSpec, baseline: Impl, candidate: Impl, reference: Callable[..., Any], inputs: Inputs, dtype: str, device: str, label: str
) -> list[CheckResult]:
    """Each optional float argument of the launcher that the reference also takes, at another value
    than its default (only defaults are otherwise passed): an ignored argument fails here."""
    import ast
    import inspect

    try:
        ref_params = inspect.signature(reference).parameters
    except (TypeError, ValueError):
        return []
    tree = ast.parse(baseline.source)
    fn = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == baseline.launcher_name), None)
    if fn is None:
        return []
    args = fn.args.args[len(fn.args.args) - len(fn.args.defaults):]
    checks = []
    for arg in args:
        if arg.arg in inputs or arg.arg not in ref_params or not (isinstance(arg.annotation, ast.AST) and "float" in ast.unparse(arg.annotation)):
            continue
        value = 0.37  # not a default anyone picks
        changed = {**inputs, arg.arg: value}
        want = call_reference(spec, reference, changed)
        got, _ = call(spec, candidate, changed, device)
        bad = first_mismatch(got, want, tolerances(spec, want, dtype))
        reason = f"integrity: ignores argument {arg.arg} (wrong with {arg.arg}={value}: {bad.describe()}; {label})" if bad else f"integrity: follows argument {arg.arg}"
        checks.append(CheckResult(name=f"argument {arg.arg}", layer="integrity", passed=bad is None, reason=reason))
    return checks


def _launch_inputs(spec: OpSpec, base: Observed, cand: Observed) -> CheckResult:
    """The inputs the baseline's kernels read directly must reach one of the candidate's kernels:
    a kernel that only copies a result computed elsewhere is given none of them."""
    given = lambda obs: {n for launch in obs.launches for n in launch.inputs}  # noqa: E731
    missing = sorted(given(base) - given(cand))
    if cand.launches and missing:
        return _fail("kernel inputs", f"integrity: inputs {', '.join(missing)} never reach a Triton kernel (the baseline's kernels read them; the result is computed elsewhere)")
    return CheckResult(name="kernel inputs", layer="integrity", passed=True, reason="integrity: the kernels are given the inputs the baseline's kernels read")


# -- what the monitor saw ------------------------------------------------------------------


def _allowed(name: str) -> bool:
    if name.endswith(".__get__") or name in ALLOWED_TORCH:
        return True
    return name.startswith("torch.Tensor.") and name.removeprefix("torch.Tensor.") in ALLOWED_METHODS


def _monitor(spec: OpSpec, base: Observed, cand: Observed, imported: dict[str, Observed], label: str) -> list[CheckResult]:
    """One passing result per concern, or one failing result per distinct finding."""

    def results(name: str, failures: list[str], ok: str) -> list[CheckResult]:
        if not failures:
            return [CheckResult(name=name, layer="integrity", passed=True, reason=ok)]
        return [CheckResult(name=name, layer="integrity", passed=False, reason=f) for f in dict.fromkeys(failures)]

    at_import = imported.get("candidate", Observed())
    calls = sorted(n for n in cand.torch_calls if not _allowed(n) and n not in base.torch_calls)
    checks = results(
        "runtime: torch ops",
        [f"integrity: calls {n.replace('torch.Tensor.', 'Tensor.')} in launcher (at run time, {label}; the baseline does not)" for n in calls],
        "integrity: no torch compute outside the kernel at run time",
    )
    checks[0].details["torch_calls"] = dict(cand.torch_calls)
    no_kernel = base.launches and not cand.launches
    checks += results(
        "runtime: kernel launch",
        [f"integrity: launches no Triton kernel (the baseline launches {len(base.launches)}); the result is computed elsewhere"] if no_kernel else [],
        f"integrity: launches {sorted({launch.kernel for launch in cand.launches})}",
    )

    def seen(kind: str, attr: str) -> list[str]:
        during, imported_ = getattr(cand, attr), getattr(at_import, attr)
        if len(during) / max(cand.calls, 1) <= len(getattr(base, attr)) / max(base.calls, 1) and not imported_:
            return []  # the baseline does as much per call (and nothing at import)
        return [f"integrity: {kind} ({k} during the call)" for k in during] + [f"integrity: {kind} ({k} at import)" for k in imported_]

    checks += results("runtime: threads", seen("starts a thread", "threads"), "integrity: no thread or process started")
    checks += results("runtime: streams", seen("creates a CUDA stream", "streams"), "integrity: no CUDA stream created")
    patched = [f"integrity: patches {k} (during the call)" for k in cand.patched] + [f"integrity: patches {k} (at import)" for k in at_import.patched]
    checks += results("runtime: patching", patched, "integrity: no timer, benchmark hook or allocator replaced")
    checks += _limits(spec, cand)
    return checks


def _limits(spec: OpSpec, obs: Observed) -> list[CheckResult]:
    """Each declared limit against every launch: a launch parameter (any case), `A*B` of two,
    or what the compiled GPU kernel reports (registers, shared_memory_bytes)."""
    failures, unchecked = [], []
    for name, limit in limit_names(spec).items():
        seen = False
        for launch in obs.launches:
            given = {"num_warps": 4, **launch.args, **launch.resources}
            values = {k.lower(): v for k, v in given.items()}
            shown = {k.lower(): k for k in given}  # the name as the launch spells it
            parts = name.split("*")
            if not all(p in values and isinstance(values[p], (int, float)) for p in parts):
                continue
            seen = True
            value = math.prod(values[p] for p in parts)
            if value > limit:
                label = "*".join(shown[p] for p in parts)
                failures.append(f"integrity: {label}={value} exceeds declared limit {limit} (kernel {launch.kernel} at run time)")
        if not seen:
            unchecked.append(name)
    details = {"unchecked": unchecked, "launches": [{"kernel": launch.kernel, **launch.args, **launch.resources} for launch in obs.launches[:20]]}
    if failures:
        return [CheckResult(name="runtime: resource limits", layer="integrity", passed=False, reason=f, details=details) for f in dict.fromkeys(failures)]
    # a limit no launch parameter or GPU measurement names cannot be checked here: say so
    ok = "integrity: launches within declared limits" + (f" (not measurable here: {', '.join(unchecked)})" if unchecked else "")
    return [CheckResult(name="runtime: resource limits", layer="integrity", passed=True, reason=ok, details=details)]


# -- unwritten and uninitialised outputs -----------------------------------------------------


def _unwritten(spec: OpSpec, impl: Impl, inputs: Inputs, want: Result, device: str, label: str, obs: Observed) -> CheckResult:
    nan_run, _ = call(spec, impl, inputs, device, observe=obs)
    poison_run, _ = call(spec, impl, inputs, device, fill=POISON, observe=obs)
    for name, w in want.items():
        a, b = nan_run.get(name), poison_run.get(name)
        if not (isinstance(w, torch.Tensor) and w.is_floating_point() and isinstance(a, torch.Tensor) and a.shape == w.shape):
            continue
        a, b, w = (t.detach().cpu().double() for t in (a, b, w))
        never = a.isnan() & ~w.isnan() & (b == POISON)
        if never.any():
            idx = _index(never)
            return _fail("unwritten output", f"integrity: output element never written (NaN at {name}{idx}, {label})")
        differs = ~((a == b) | (a.isnan() & b.isnan()))
        if differs.any():
            idx = _index(differs)
            return _fail(
                "unwritten output",
                f"integrity: reads uninitialised memory ({name}{idx} = {float(a[tuple(idx)]):.6g} with NaN-filled buffers, {float(b[tuple(idx)]):.6g} with {POISON:g}-filled; {label})",
            )
    # a third fill drawn now: a kernel that branches on the poison values it finds is wrong here
    import random

    fill = round(random.uniform(-900.0, 900.0), 3)
    third, _ = call(spec, impl, inputs, device, fill=fill, observe=obs)
    bad = first_mismatch(third, want, tolerances(spec, want, label.split(" ")[0]))
    if bad is not None:
        return _fail("unwritten output", f"integrity: output depends on what its buffer held before (with outputs filled with {fill:g}: {bad.describe()}; {label})")
    return CheckResult(name="unwritten output", layer="integrity", passed=True, reason="integrity: every output element written, none read before written")


# -- caches ------------------------------------------------------------------------------


def _cache_probe(
    spec: OpSpec, impl: Impl, reference: Callable[..., Any], inputs: Inputs, other: Inputs, tol: Tolerance, device: str, label: str, obs: Observed
) -> CheckResult:
    want_a, want_b = call_reference(spec, reference, inputs), call_reference(spec, reference, other)
    if first_mismatch(want_a, want_b, tol) is None:
        return CheckResult(name="cache probe", layer="integrity", passed=None, reason="integrity: cache probe not run (new inputs give the same reference result)")
    # new tensors of the same shape and new contents, at addresses no earlier tensor began at
    got_a, _ = call(spec, impl, inputs, device, observe=obs)
    args = {k: _fresh_copy(v) for k, v in other.items()}
    got_b = collect(spec, impl.run(args, observe=obs), args)
    if first_mismatch(got_b, want_b, tol) and first_mismatch(got_b, got_a, tol) is None:
        return _fail("cache probe", f"integrity: result cached by shape (new inputs of the same shape returned the previous output; {label})")
    # the same tensors (same data_ptr) with new contents written in place
    args = clone_inputs(inputs)
    first = collect(spec, impl.run(args, observe=obs), args)
    with torch.no_grad():
        for name, t in args.items():
            if isinstance(t, torch.Tensor):
                t.copy_(other[name])
    second = collect(spec, impl.run(args, observe=obs, same_tensors=True), args)
    if first_mismatch(second, want_b, tol) and first_mismatch(second, first, tol) is None:
        return _fail("cache probe", f"integrity: result cached by data_ptr (same pointers with new contents returned the old output; {label})")
    return CheckResult(name="cache probe", layer="integrity", passed=True, reason="integrity: new contents give new results (new pointers and same pointers)")


# -- skipped work ------------------------------------------------------------------------


def _perturbed(t: torch.Tensor, seed: int) -> torch.Tensor:
    """A different value of the same input, kept in its valid range.

    Floats: each element moved by 5-30% of itself, sign kept; zeros moved by a
    quarter of the typical magnitude. Integers (lengths, indices): only ever
    shortened, by up to a quarter and at least 1 where above 1, so a length
    stays within its cache and an index within its table.
    """
    g = torch.Generator().manual_seed(seed)
    if t.dtype == torch.bool:
        return t
    if not (t.is_floating_point() or t.is_complex()):
        x = t.detach().cpu().long()
        cut = (torch.rand(x.shape, generator=g) * 0.25 * x.abs()).ceil().long()
        return torch.where(x > 1, (x - cut).clamp_min(1), x).to(t.dtype).to(t.device)
    x = t.detach().cpu().float()
    scale = float(x.abs().mean()) or 1.0
    u = torch.rand(x.shape, generator=g) * 0.5 - 0.25
    moved = torch.where(x == 0, 0.25 * scale * torch.randn(x.shape, generator=g), x * (1 + u + 0.05 * u.sign()))
    return moved.to(t.dtype).to(t.device)


def _perturbation(
    spec: OpSpec,
    impl: Impl,
    reference: Callable[..., Any],
    inputs: Inputs,
    want: Result,
    tol: Tolerance,
    device: str,
    label: str,
    obs: Observed,
) -> list[CheckResult]:
    names = spec.sensitive_inputs or tuple(k for k, v in inputs.items() if isinstance(v, torch.Tensor) and v.is_floating_point())
    base, _ = call(spec, impl, inputs, device, observe=obs)
    checks = []
    for i, name in enumerate(names):
        changed_inputs = {**inputs, name: _perturbed(inputs[name], 7919 + i)}
        want_p = call_reference(spec, reference, changed_inputs)
        got_p, _ = call(spec, impl, changed_inputs, device, observe=obs)
        reason = _sensitivity(want, want_p, base, got_p, tol, name)
        if reason is None and (bad := first_mismatch(got_p, want_p, tol)):
            reason = f"integrity: wrong output when input {name} perturbed ({bad.describe(tol)})"
        checks.append(
            CheckResult(
                name=f"perturb {name}",
                layer="integrity",
                passed=reason is None,
                reason=f"{reason} ({label})" if reason else f"integrity: output follows input {name}",
            )
        )
    return checks


def _sensitivity(want: Result, want_p: Result, got: Result, got_p: Result, tol: Tolerance, name: str) -> str | None:
    """Where the reference changes, the candidate must change too."""
    for out, w in want.items():
        if not isinstance(w, torch.Tensor) or not w.is_floating_point():
            continue
        w0, w1 = w.double().cpu(), want_p[out].double().cpu()
        must = (w1 - w0).abs() > tol.atol + tol.rtol * w0.abs()
        if not must.any():
            continue
        same = got[out].double().cpu() == got_p[out].double().cpu()
        if bool(same[must].all()):
            return f"integrity: output unchanged when input {name} perturbed ({out}: the reference changes at {int(must.sum())} elements)"
        stuck = same & must
        if stuck.any():
            return f"integrity: output element {out}{_index(stuck)} unchanged when input {name} perturbed (the reference changes there)"
    return None


def _index(mask: torch.Tensor) -> list[int]:
    return [int(i) for i in torch.nonzero(mask)[0]]


def _fail(name: str, reason: str) -> CheckResult:
    return CheckResult(name=name, layer="integrity", passed=False, reason=reason)


def _fresh_copy(t: Any) -> Any:
    """A copy whose data_ptr is 16 bytes into its buffer: allocators (CPU 64 B, CUDA 512 B
    granules) never start a block there, so no freed tensor can have had this pointer."""
    if not isinstance(t, torch.Tensor) or not t.is_contiguous():
        return t.clone() if isinstance(t, torch.Tensor) else t
    off = max(1, 16 // t.element_size())
    buf = torch.empty(t.numel() + off, dtype=t.dtype, device=t.device)
    view = buf[off:].view(t.shape)
    view.copy_(t)
    return view
