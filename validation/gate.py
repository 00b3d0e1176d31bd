"""The validation gate: one call checks a candidate of an op and returns its evidence.

    validate("kda_decode", Path("candidate.py"), device="auto", out_dir=Path("evidence"))
        -> EvidenceBundle (patterns.core.records)

This is the gate's one public entry point: the CLI (`patterns validate`), the
agent, the MCP server, user-kernel specs (`op` as a path to a spec.py) and Ray
tasks all call it, and its signature is kept stable. Keyword arguments:
`device` ("auto", "cpu", "cuda"), `out_dir` (where the bundle is written),
`rounds` (timed rounds per shape), `on_stage` (progress callback), `max_cost`
(the pattern's time allowance), `timeout` (seconds for the whole validation;
default the op's `timeout_s`), `isolate` (True: the candidate runs in a child
process, always for untrusted code; False only measures isolation's overhead
on trusted code).

It runs, in order: correctness (correctness.py), partitioned vs unpartitioned
(partition.py), integrity (static.py + integrity.py + what the child process
reported: sandbox.py, child.py) and, only on a GPU and only when everything
before passed, performance (perf.py). The candidate and the baseline run in one
child process (sandbox.Child) for the whole validation; this process makes the
inputs, runs the reference, compares and decides. A child that hangs, crashes
or exits is a rejection with its reason. The gate refuses to report a speedup
on a red gate. With `candidate=None` the baseline is checked against itself (a
fresh import of the same file), which is how an op's own spec, reference and
tolerances are validated.
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
from patterns.validation.partition import check_partition
from patterns.validation.perf import MIN_ROUNDS, check_performance, gpu_unavailable_reason, needs_gpu
from patterns.validation.sandbox import Child, ChildError, Finding, InProcess, Limits
from patterns.core.ops import load_reference, load_spec, resolve_device, source_path
from patterns.core.opspec import ACCUMULATION, OpSpec


def validate(
    op: str | OpSpec,
    candidate_path: Path | None = None,
    *,
    device: str = "auto",
    out_dir: Path | None = None,
    rounds: int = MIN_ROUNDS,
    on_stage: Callable[[str], None] | None = None,
    max_cost: float = 1.0,
    timeout: float | None = None,
    isolate: bool = True,
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

    limits = Limits(timeout_s=timeout or spec.timeout_s, call_timeout_s=min(spec.call_timeout_s, timeout or spec.call_timeout_s))
    host = Child(device, limits) if isolate else InProcess(device)
    try:
        checks, ceilings = _run(spec, host, baseline_file, candidate_file, device, rounds, max_cost, stage)
    finally:
        host.close()

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


def _run(
    spec: OpSpec, host: Child | InProcess, baseline_file: Path, candidate_file: Path, device: str, rounds: int, max_cost: float, stage: Callable[[str], None]
) -> tuple[list[CheckResult], dict]:
    checks: list[CheckResult] = []
    try:
        baseline, seen_baseline = load_impl(spec, "baseline", baseline_file, host)
        stage("importing the candidate")
        candidate, seen_candidate = load_impl(spec, "candidate", candidate_file, host)
    except ChildError as e:
        return [*sandbox_checks(host, e), CheckResult(name="speed", layer="performance", passed=None, reason="performance: not measured: the candidate was rejected at import")], {}
    imported = {"baseline": seen_baseline, "candidate": seen_candidate}
    reference = load_reference(spec)
    layers = (
        ("correctness", lambda: check_correctness(spec, baseline, candidate, reference, device)),
        ("partition", lambda: check_partition(spec, baseline, candidate, reference, device)),
        ("integrity", lambda: check_integrity(spec, baseline, candidate, reference, device, imported)),
    )
    for name, run in layers:
        if getattr(host, "dead", None) is not None:
            break
        stage(name)
        checks += run()
    # after the child died, every later call says only that: the sandbox check below names why
    checks = [c for c in checks if "ChildError: not run:" not in c.reason]
    checks += sandbox_checks(host, getattr(host, "dead", None))
    ceilings: dict = {}
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
        seen = len(host.findings)
        try:
            perf_checks, ceilings = check_performance(spec, baseline, candidate, device, rounds, spec.acceptance.allowing_cost(max_cost), reference=reference)
        except ChildError as e:
            perf_checks = [CheckResult(name="speed", layer="performance", passed=False, reason=f"performance: the timed runs failed: {e}")]
        checks += perf_checks
        checks += sandbox_checks(host, getattr(host, "dead", None), since=seen)
    return checks, ceilings


def sandbox_checks(host: Child | InProcess, dead: ChildError | None, since: int = 0) -> list[CheckResult]:
    """One failing check per finding the child reported (its kind names the check), and one for a
    child that hung, crashed, exited or broke the protocol; one passing check when there was none."""
    checks = []
    for f in host.findings[since:]:
        who = "the baseline" if f.role == "baseline" else "the candidate" if f.role == "candidate" else "the timed runs"
        reason = f"integrity: {f.what} ({who}{', ' + f.when if f.when else ''})"
        if not any(c.reason == reason for c in checks):
            checks.append(CheckResult(name=f"sandbox: {f.kind}", layer="integrity", passed=False, reason=reason, details={"role": f.role}))
    if dead is not None:
        checks.append(CheckResult(name=f"sandbox: {dead.kind}", layer="integrity", passed=False, reason=f"integrity: {dead}"))
    if not checks and since == 0 and getattr(host, "isolated", False):
        checks.append(CheckResult(name="sandbox", layer="integrity", passed=True, reason="integrity: ran in a child process; no write outside its scratch folder, process, socket, ctypes, frame access, patching or global state change seen"))
    return checks


def _check_spec(spec: OpSpec) -> None:
    missing = [d for d in (*spec.dtypes, *spec.gpu_dtypes) if d not in spec.tolerance]
    if missing:
        raise GateInputError(f"{spec.name}: no tolerance declared for dtype(s) {', '.join(missing)}")
    if not spec.shapes or not spec.dtypes:
        raise GateInputError(f"{spec.name}: the spec declares no shapes or no dtypes")
    if spec.accumulation not in ACCUMULATION:
        raise GateInputError(f"{spec.name}: accumulation {spec.accumulation!r} is not one of {', '.join(ACCUMULATION)}")
    if isinstance(spec.reduction, str) and any(spec.reduction not in s for s in spec.shapes):
        raise GateInputError(f"{spec.name}: reduction {spec.reduction!r} is not a key of every shape")
    if len(spec.seeds) < 3:
        raise GateInputError(f"{spec.name}: at least three seeds are required, the spec has {len(spec.seeds)}")
