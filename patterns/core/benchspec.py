"""What an op of kernels/ declares so the GPU benchmark can time it.

Each benchmarked op has `kernels/<op>/benchmark.py` defining `BENCHMARK =
Benchmark(...)`: its candidates as chains of rewrites applied to the op's
baseline (`steps`, data), launch-parameter sweeps of those chains, the
implementations the rewrites are measured against (upstream, the kernels at
other launches: `variants`), and the targets the measurements are judged by.
The runner (`python -m patterns.benchmark`) and the report
(`python -m patterns.validation.benchmarks_report`) read nothing else about
the op besides its OpSpec, so one place decides each of these.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

# a chain of `patterns apply PATTERN --param K=V ...` calls, applied in order
Chain = tuple[tuple[str, dict[str, str]], ...]


@dataclass(frozen=True)
class Step:
    """One candidate: a chain of rewrites applied in order to the op's baseline."""

    label: str
    chain: Chain
    hypothesis: str


@dataclass
class Variant:
    """One implementation timed in a case: `launch(inputs)` runs the op once and names its outputs."""

    name: str
    role: str  # baseline | step | upstream | upstream-sweep | sweep
    launch: Callable[[dict], Any]  # what is timed: no copies
    note: str = ""
    # names (and copies) what `launch` returned, for the comparison with the reference
    outputs: Callable[[Any, dict], dict] = lambda ret, a: ret
    module: Any = None  # the candidate's module, where an autotuner records the config it chose


@dataclass
class Context:
    """One case as the runner has loaded it, for an op's `variants`: `baseline` and every step are
    loaded implementations (`.module` is the imported candidate file)."""

    op: str
    spec: Any  # OpSpec
    device: str
    sweep: bool  # launch-parameter sweeps asked for
    steps: dict[str, Any] = field(default_factory=dict)  # label -> implementation
    sweeps: dict[str, Any] = field(default_factory=dict)  # label -> implementation (Benchmark.sweeps)
    baseline: Any = None
    sources: dict[str, dict] = field(default_factory=dict)  # label -> {chain, source}


@dataclass(frozen=True)
class Benchmark:
    title: str  # the op's section heading in BENCHMARKS.md
    position: int  # where that section stands (and the op's turn in a run of every case)
    steps: tuple[Step, ...]  # the last step is the op's candidate
    # launch-parameter sweeps of the same chains, timed with --sweep: (label, chain)
    sweeps: tuple[tuple[str, Chain], ...] = ()
    # further implementations timed beside the steps (upstream; the kernels at other launches with --sweep)
    variants: Callable[[Context], list[Variant]] = lambda ctx: []
    # the targets, evaluated on a run's JSON (so a report re-judges old runs by the current rules)
    targets: Callable[[dict], list[dict]] = lambda result: []
    upstream: str = ""  # the upstream variant the report's main table compares with
    shape_keys: tuple[str, ...] = ()  # the shape's entries a report row shows (default: all)


# --------------------------------------------------------------------------------------
# helpers for the definitions
# --------------------------------------------------------------------------------------

# the last kernel a variant's launch compiled: the runner records its resources (registers, spills, MMA kind)
_LAST_LAUNCH: list[Any] = []


def launched(handle: Any) -> Any:
    """Record a kernel launch's compiled handle (what `kernel[grid](...)` returns); returns it."""
    _LAST_LAUNCH[:] = [handle]
    return handle


def last_launch(clear: bool = False) -> Any:
    """The handle recorded last (None if none); `clear=True` forgets it instead."""
    if clear:
        _LAST_LAUNCH.clear()
        return None
    return _LAST_LAUNCH[0] if _LAST_LAUNCH else None


def target(what: str, met: bool, measured: str, **extra) -> dict[str, Any]:
    return {"what": what, "met": bool(met), "measured": measured, **extra}


def fmt_ratio(r: dict) -> str:
    return f"{r['median']:.3f} [{r['ci95'][0]:.3f}, {r['ci95'][1]:.3f}]"


def ratio_target(what: str, r: dict, at_least: float) -> dict[str, Any]:
    """Met when the median ratio reaches `at_least`; a miss whose 95% interval still reaches it is a tie within noise."""
    met = r["median"] >= at_least
    note = "" if met or r["ci95"][1] < at_least else f" (a tie: the 95% interval reaches {at_least:g})"
    return target(what, met, fmt_ratio(r) + note)
