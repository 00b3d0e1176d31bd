"""The validation gate: one call checks a candidate of an op and returns its evidence.

    validate("kda_decode", Path("candidate.py"), device="auto", out_dir=Path("evidence"))

runs, in order: correctness (correctness.py), partitioned vs unpartitioned
(partition.py), integrity (static.py + integrity.py) and, only on a GPU and
only when everything before passed, performance (perf.py). The gate refuses to
report a speedup on a red gate. With `candidate=None` the baseline is checked
against itself (a fresh import of the same file), which is how an op's own
spec, reference and tolerances are validated.
"""
from __future__ import annotations

import datetime as dt
import os
from pathlib import Path
from typing import Callable

from patterns.core import interpreter
from patterns.core.records import CheckResult, EvidenceBundle
from patterns.validation.bundle import environment, write_bundle
from patterns.validation.correctness import check_correctness
from patterns.validation.integrity import check_integrity
from patterns.validation.loader import GateInputError, check_candidate, load_impl
from patterns.validation.monitor import Observed, restore, snapshot, watch
from patterns.validation.partition import check_partition
from patterns.validation.perf import MIN_ROUNDS, check_performance, gpu_unavailable_reason, needs_gpu
from patterns.core.ops import load_reference, load_spec, resolve_device, source_path
from patterns.core.opspec import OpSpec


def validate(
    op: str | OpSpec,
    candidate_path: Path | None = None,
    *,
    device: str = "auto",
    out_dir: Path | None = None,
    rounds: int = MIN_ROUNDS,
    on_stage: Callable[[str], None] | None = None,
    max_cost: float = 1.0,
) -> EvidenceBundle:
    """Check `candidate_path` (default: the baseline itself) for `op`; write the bundle under `out_dir` if given.

    `max_cost` is the candidate's pattern's allowance (Pattern.max_cost): the speed
    rule then accepts up to that factor of the baseline's time.

    Raises OpError (one line; GateInputError for the gate's own findings) for bad input, before anything runs.
    """
    device = resolve_device(device)
    if device == "cpu":
        # kernels are decorated at import, the op's package included: the interpreter
        # must be on before anything of the op loads (and stays on in this process)
        os.environ["TRITON_INTERPRET"] = "1"
        interpreter.install_cpu_shims()
    spec = load_spec(op)
    _check_spec(spec)
    candidate_file = check_candidate(spec, Path(candidate_path) if candidate_path is not None else None)
    baseline_file = source_path(spec, spec.baseline)
    stage = on_stage or (lambda _: None)

    guarded = snapshot()
    imported = {"baseline": Observed(), "candidate": Observed()}
    with watch(imported["baseline"]):
        baseline = load_impl(spec, "baseline", baseline_file)
    with watch(imported["candidate"]):
        candidate = load_impl(spec, "candidate", candidate_file)
    reference = load_reference(spec)

    checks: list[CheckResult] = []
    layers = (
        ("correctness", lambda: check_correctness(spec, baseline, candidate, reference, device)),
        ("partition", lambda: check_partition(spec, baseline, candidate, reference, device)),
        ("integrity", lambda: check_integrity(spec, baseline, candidate, reference, device, imported)),
    )
    for name, run in layers:
        stage(name)
        checks += run()
        # a patch made outside a watched call would otherwise go unseen and skew the timing
        for label in restore(guarded):
            checks.append(CheckResult(name="runtime: patching", layer="integrity", passed=False, reason=f"integrity: patches {label} (during the {name} checks)"))
    ceilings = {}
    failing = [c for c in checks if c.passed is False]
    why = gpu_unavailable_reason(device)
    if why:
        checks.append(needs_gpu(why))
    elif failing:
        checks.append(
            CheckResult(name="speed", layer="performance", passed=None, reason=f"performance: not measured: the gate is red ({len(failing)} failing checks, first: {failing[0].reason})")
        )
    else:
        stage("performance")
        perf_checks, ceilings = check_performance(spec, baseline, candidate, device, rounds, spec.acceptance.allowing_cost(max_cost))
        checks += perf_checks

    bundle = EvidenceBundle(
        op=spec.name,
        candidate=str(candidate_file),
        baseline=str(baseline_file),
        checks=checks,
        environment=environment(device, {"ceilings": ceilings} if ceilings else None),
        created=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
    )
    if out_dir is not None:
        write_bundle(bundle, Path(out_dir))
    return bundle


def _check_spec(spec: OpSpec) -> None:
    missing = [d for d in (*spec.dtypes, *spec.gpu_dtypes) if d not in spec.tolerance]
    if missing:
        raise GateInputError(f"{spec.name}: no tolerance declared for dtype(s) {', '.join(missing)}")
    if not spec.shapes or not spec.dtypes:
        raise GateInputError(f"{spec.name}: the spec declares no shapes or no dtypes")
    if len(spec.seeds) < 3:
        raise GateInputError(f"{spec.name}: at least three seeds are required, the spec has {len(spec.seeds)}")
