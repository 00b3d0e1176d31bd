"""Correctness: the candidate against the reference on the op's declared grid.

Every shape x dtype x seed, baseline and candidate each run twice, in both
orders (baseline first, then candidate first), so a candidate that leans on
state the other left behind (a freed buffer, a warm cache) is caught. Outputs
are NaN-filled before launch; inputs not declared in-place must come back
unmodified. Each result is held to the per-dtype tolerance against the
reference at the run's dtype and, where that holds, to the bound the op's
declared accumulation dtype allows against a float64 reference
(patterns.core.compare.precision_mismatch): bf16 accumulation where fp32 is
required fails even when the bf16 tolerance admits it. One CheckResult per
(shape, dtype) for the candidate, and one for the baseline where the baseline
itself disagrees with the reference (the op's reference or tolerances are then
wrong, and the bundle says so).
"""
from __future__ import annotations

from typing import Any, Callable

from patterns.core.records import CheckResult
from patterns.validation.loader import Impl
from patterns.validation.runner import (
    ResultError,
    active_dtypes,
    call,
    call_reference,
    errors,
    first_mismatch,
    identical,
    modified_input,
    precise_result,
    precision_mismatch,
    shape_label,
    tolerances,
)
from patterns.core.opspec import OpSpec

ORDERS = (("baseline", "candidate"), ("candidate", "baseline"))


def check_correctness(
    spec: OpSpec, baseline: Impl, candidate: Impl, reference: Callable[..., Any], device: str
) -> list[CheckResult]:
    checks = []
    for dtype in active_dtypes(spec, device):
        tol = spec.tolerance[dtype]
        for shape in spec.shapes:
            label = shape_label(shape, dtype)
            stats = {"candidate": [0.0, 0.0], "baseline": [0.0, 0.0]}
            terms = spec.reduction_length(shape)
            # worst error vs a float64 reference as a fraction of what the accumulation allows
            precision = {"candidate": 0.0, "baseline": 0.0}
            precise_seeds = 0
            fail: dict[str, str] = {}
            same_as_baseline, vs_baseline = True, 0.0
            for seed in spec.seeds:
                inputs = spec.make_inputs(dict(shape), dtype, seed, device)
                want = call_reference(spec, reference, inputs)
                precise = precise_result(spec, reference, inputs)
                precise_seeds += precise is not None
                per_output = tolerances(spec, want, dtype)
                for order in ORDERS:
                    first = "candidate first" if order[0] == "candidate" else "baseline first"
                    got = {}
                    for role in order:
                        impl = candidate if role == "candidate" else baseline
                        where = f"{label}, seed {seed}, {first}"
                        try:
                            got[role], after = call(spec, impl, inputs, device)
                        except Exception as e:  # noqa: BLE001 - a crash is a local failure
                            fail.setdefault(role, f"correctness: {role} raised {type(e).__name__}: {_short(e)} ({where})")
                            continue
                        changed = modified_input(spec, inputs, after)
                        if changed:
                            fail.setdefault(role, f"correctness: input {changed[0]} modified at {list(changed[1])} by the {role} ({where})")
                        a, r = errors(got[role], want)
                        stats[role] = [_max(stats[role][0], a), _max(stats[role][1], r)]
                        try:
                            bad = first_mismatch(got[role], want, per_output)
                        except ResultError as e:
                            fail.setdefault(role, f"correctness: {e} ({where})")
                            continue
                        if bad:
                            fail.setdefault(role, f"correctness: {bad.describe()} ({where})")
                        elif precise is not None:
                            ratio, excess = precision_mismatch(got[role], precise, want, spec.accumulation, terms, dtype)
                            precision[role] = _max(precision[role], ratio)
                            if excess:
                                fail.setdefault(role, f"correctness: error beyond {spec.accumulation} accumulation: {excess.describe()} ({where})")
                    if len(got) == 2:
                        same_as_baseline &= identical(got["candidate"], got["baseline"])
                        vs_baseline = _max(vs_baseline, errors(got["candidate"], got["baseline"])[0])
            details = {
                "max_abs_err": stats["candidate"][0],
                "max_rel_err": stats["candidate"][1],
                "baseline_max_abs_err": stats["baseline"][0],
                "baseline_max_rel_err": stats["baseline"][1],
                "max_abs_diff_vs_baseline": vs_baseline,
                "bit_identical_to_baseline": same_as_baseline,
                "seeds": list(spec.seeds),
                "orders": ["baseline first", "candidate first"],
                "tolerance": {"atol": tol.atol, "rtol": tol.rtol},
                "precision": {
                    "accumulation": spec.accumulation,
                    "terms": terms,
                    "reference": "float64" if precise_seeds else "none (the reference does not run in float64)",
                    "worst_error_vs_bound": precision["candidate"],
                    "baseline_worst_error_vs_bound": precision["baseline"],
                },
            }
            within = f"within atol {tol.atol:g}, rtol {tol.rtol:g}"
            if precise_seeds:
                within += f" and {precision['candidate']:.2f}x of what {spec.accumulation} accumulation allows vs float64"
            at = {**shape, "dtype": dtype}
            checks.append(
                CheckResult(
                    name="correctness",
                    layer="correctness",
                    passed="candidate" not in fail,
                    reason=fail.get("candidate", f"correctness: {within} ({label}, {len(spec.seeds)} seeds, both orders)"),
                    shape=at,
                    details=details,
                )
            )
            if "baseline" in fail:
                checks.append(CheckResult(name="baseline-vs-reference", layer="correctness", passed=False, reason=fail["baseline"], shape=at))
    return checks


def _max(a: float, b: float) -> float:
    return b if b != b or b > a else a  # NaN wins: an unwritten element must show


def _short(e: BaseException, n: int = 160) -> str:
    text = str(e).strip().splitlines()[0] if str(e).strip() else ""
    return text[:n]
