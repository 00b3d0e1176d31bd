"""Partitioned vs unpartitioned: how the error grows with the number of partitions.

Where an op declares a partition (chunks merged, KV splits, V tiles, K splits),
`partition.run(impl, inputs, n)` computes the op in `n` partitions. For every
declared count what `run` returns is compared with the unpartitioned result
(`partition.unpartitioned(inputs)`, or the op's reference on the whole input)
and with the implementation's own `n = 1` path, and the error is reported as a
curve over the counts: a TF32 merge chain shows its drift growing with the
number of merges.
The baseline's curve is measured beside the candidate's, so the bundle shows
whether a rewrite drifts more or less than what it replaces.
"""
from __future__ import annotations

from typing import Any, Callable

import torch

from patterns.core.records import CheckResult
from patterns.validation.loader import Impl
from patterns.validation.runner import Result, active_dtypes, clone_inputs, errors, first_mismatch, shape_label
from patterns.core.opspec import Inputs, OpSpec, Partition


def check_partition(
    spec: OpSpec, baseline: Impl, candidate: Impl, reference: Callable[..., Any], device: str
) -> list[CheckResult]:
    part = spec.partition
    if part is None:
        return []
    shape = dict(part.shape or spec.shapes[0])
    checks = []
    active = active_dtypes(spec, device)
    for dtype in [d for d in active if d in part.tolerance] or list(part.tolerance):
        tol = part.tolerance[dtype]
        label = shape_label(shape, dtype)
        inputs = spec.make_inputs(dict(shape), dtype, spec.seeds[0], device)
        args = clone_inputs(inputs)
        whole_fn = part.unpartitioned or (lambda a: reference(**a))
        want = _named(spec, whole_fn(args), args)
        curves, failure = {}, None
        for impl in (candidate, baseline):
            curve = []
            try:
                whole = _run(spec, part, impl, inputs, 1, device)
            except Exception:  # noqa: BLE001 - some ops have no n=1 path; the reference still anchors
                whole = None
            for n in part.counts:
                point: dict[str, Any] = {"n": n}
                try:
                    got = _run(spec, part, impl, inputs, n, device)
                except Exception as e:  # noqa: BLE001
                    point["error"] = f"{type(e).__name__}: {e}"
                    if impl is candidate and failure is None:
                        failure = f"partition: {part.axis} n={n} raised {type(e).__name__}: {e} ({label})"
                    curve.append(point)
                    continue
                point["abs_err"], point["rel_err"] = errors(got, want)
                if whole is not None:
                    point["abs_err_vs_unpartitioned"], point["rel_err_vs_unpartitioned"] = errors(got, whole)
                bad = first_mismatch(got, want, tol)
                point["passed"] = bad is None
                if bad and impl is candidate and failure is None:
                    failure = f"partition: {bad.describe(tol)} at {part.axis} n={n} ({label})"
                curve.append(point)
            curves[impl.role] = curve
        growth = ", ".join(f"n={p['n']}: {p.get('rel_err', float('nan')):.2g}" for p in curves["candidate"])
        checks.append(
            CheckResult(
                name="partition",
                layer="partition",
                passed=failure is None,
                reason=(failure + f"; rel err by count: {growth}") if failure else f"partition: {part.axis} within tolerance; rel err by count: {growth}",
                shape={**shape, "dtype": dtype},
                details={
                    "axis": part.axis,
                    "counts": list(part.counts),
                    "tolerance": {"atol": tol.atol, "rtol": tol.rtol},
                    "candidate": curves["candidate"],
                    "baseline": curves["baseline"],
                },
            )
        )
    return checks


def _named(spec: OpSpec, ret: Any, args: Inputs) -> Result:
    """What a partitioned run returns, compared as is: named like the op's outputs
    where the count matches, else `out0`, `out1`...; None: the in-place inputs."""
    if ret is None:
        return {name: args[name].detach().clone() for name in spec.inplace}
    rets = tuple(ret.values()) if isinstance(ret, dict) else tuple(ret) if isinstance(ret, (tuple, list)) else (ret,)
    names = spec.outputs if len(rets) == len(spec.outputs) else [f"out{i}" for i in range(len(rets))]
    return {name: r.detach().clone() if isinstance(r, torch.Tensor) else r for name, r in zip(names, rets)}


def _run(spec: OpSpec, part: Partition, impl: Impl, inputs: Inputs, n: int, device: str) -> Result:
    args = clone_inputs(inputs)
    ret = part.run(impl.launcher, args, n)  # each launcher call runs where the impl lives, outputs NaN-poisoned
    return _named(spec, ret, args)
