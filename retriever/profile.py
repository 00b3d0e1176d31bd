"""Profiles that replace the estimate: Nsight Compute CSV, torch.profiler trace, evidence bundle.

A measured profile says what the estimate can only predict. The roofline and
occupancy verdicts come from the profile; the static hazards the estimate
found (numerics, host) are kept, since no profile measures them.
"""
from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from patterns.retriever.estimate import Analysis
from patterns.retriever.units import UnitError, convert
from patterns.core.records import Bottleneck, EvidenceBundle
from patterns.core.schema import BottleneckClass

_STATIC = {BottleneckClass.numerics, BottleneckClass.host}

# ncu --csv --page raw metric names
NCU_TIME = "gpu__time_duration.sum"
NCU_DRAM = "dram__throughput.avg.pct_of_peak_sustained_elapsed"
NCU_SM = "sm__throughput.avg.pct_of_peak_sustained_elapsed"
NCU_GRID = "launch__grid_size"
NCU_WAVES = "launch__waves_per_multiprocessor"
NCU_OCC = "sm__warps_active.avg.pct_of_peak_sustained_active"
NCU_SMS = "device__attribute_multiprocessor_count"
# the same DRAM share under the name ncu's SpeedOfLight section writes (the default and `--section
# SpeedOfLight` reports of ncu 2023 and later): read where the Memory Workload section's name is absent
NCU_DRAM_SOL = "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed"


class ProfileError(ValueError):
    """A profile that cannot be read; one line naming the file."""


def _num(v: str) -> float:
    return float(v.replace(",", "").strip())


def parse_ncu_csv(path: Path, kernel: str) -> list[Bottleneck]:
    text = path.read_text(encoding="utf-8", errors="replace")
    start = text.find('"ID"')
    if start < 0:
        raise ProfileError(f"{path}: not an `ncu --csv --page raw` export (no \"ID\" header row)")
    rows = list(csv.reader(io.StringIO(text[start:])))
    header = rows[0]
    # the second row holds the units ncu chose (`--print-units auto`: msecond for a 4 ms kernel)
    units = rows[1] if len(rows) > 1 and not rows[1][0].strip().isdigit() else None
    data = [dict(zip(header, r)) for r in rows[(2 if units else 1):] if len(r) == len(header)]
    return _ncu_launches(path, kernel, header, data, dict(zip(header, units)) if units else {})


def parse_ncu_report(path: Path, kernel: str) -> list[Bottleneck]:
    """A binary `.ncu-rep`, read with NVIDIA's `ncu-report` package (pip install 'patterns[ncu]')."""
    try:
        import ncu_report
    except ImportError:
        raise ProfileError(f"{path}: reading .ncu-rep needs NVIDIA's ncu-report package "
                           "(pip install 'patterns[ncu]'), or export a CSV: ncu --import FILE --csv --page raw") from None
    try:
        ctx = ncu_report.load_report(str(path))
    except Exception as exc:  # the package raises its own types for damaged reports
        raise ProfileError(f"{path}: not a readable Nsight Compute report ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})") from None
    names = ("Kernel Name", NCU_TIME, NCU_DRAM, NCU_DRAM_SOL, NCU_SM, NCU_GRID, NCU_WAVES, NCU_OCC)
    data, units = [], {}
    for r in range(ctx.num_ranges()):
        rng = ctx.range_by_idx(r)
        for a in range(rng.num_actions()):
            action = rng.action_by_idx(a)
            row = {"Kernel Name": action.name()}
            for name in names[1:]:
                m = action.metric_by_name(name)
                if m is not None:
                    row[name] = str(m.as_double())
                    units[name] = m.unit() or ""
            data.append(row)
    return _ncu_launches(path, kernel, [n for n in names if any(n in row for row in data)], data, units)


def _ncu_launches(path: Path, kernel: str, header: list[str], data: list[dict], unit: dict[str, str]) -> list[Bottleneck]:
    if NCU_DRAM not in header and NCU_DRAM_SOL in header:
        data = [{**r, NCU_DRAM: r.get(NCU_DRAM_SOL)} for r in data]
        header, unit = [*header, NCU_DRAM], {**unit, NCU_DRAM: unit.get(NCU_DRAM_SOL, "%")}
    for need in ("Kernel Name", NCU_TIME, NCU_DRAM, NCU_SM):
        if need not in header:
            raise ProfileError(f"{path}: column '{need}' missing (profile with --set full or --metrics {NCU_DRAM},{NCU_SM})")
    mine = [r for r in data if kernel in r["Kernel Name"]] or ([] if kernel else data)
    if not mine:
        names = sorted({r["Kernel Name"][:40] for r in data})[:5]
        raise ProfileError(f"{path}: no launch of kernel '{kernel}' (profiled: {', '.join(names)})")

    def value(row: dict, name: str, default_unit: str) -> float | None:
        raw = row.get(name)
        if raw is None or not str(raw).strip() or str(raw).strip() == "n/a":
            return None
        u = unit.get(name) or default_unit
        try:
            v, kind = convert(_num(raw), u)
        except UnitError as exc:
            raise ProfileError(f"{path}: column '{name}': {exc}") from None
        return v * 1e6 if kind == "time" else v

    try:
        t = sum(value(r, NCU_TIME, "nsecond") or 0.0 for r in mine) / len(mine)
        dram = sum(value(r, NCU_DRAM, "%") or 0.0 for r in mine) / len(mine)
        sm = sum(value(r, NCU_SM, "%") or 0.0 for r in mine) / len(mine)
        grid = value(mine[0], NCU_GRID, "")
        waves = value(mine[0], NCU_WAVES, "")
        occ = value(mine[0], NCU_OCC, "%")
    except ValueError as exc:
        if isinstance(exc, ProfileError):
            raise
        raise ProfileError(f"{path}: non-numeric metric value ({exc})") from None
    nums = {"duration_us": round(t, 3), "dram_pct_of_peak": dram, "sm_pct_of_peak": sm, "launches": len(mine)}
    if grid is not None:
        nums["programs"] = grid
    if waves is not None:
        nums["waves"] = waves
    if occ is not None:
        nums["achieved_occupancy_pct"] = occ
    return _classify(nums, f"ncu: {len(mine)} launches of {kernel or 'all kernels'}", "ncu")


def _classify(nums: dict, where: str, source: str) -> list[Bottleneck]:
    out = []
    dram, sm, t_us = nums.get("dram_pct_of_peak", 0), nums.get("sm_pct_of_peak", 0), nums.get("duration_us", 0)
    waves = nums.get("waves")
    if t_us and t_us < 5:
        out.append(Bottleneck(cls=BottleneckClass.launch, source=source, numbers=nums, rationale=[f"{where}: {t_us:.2f} µs per launch, near launch overhead"]))
    if waves is not None and waves < 0.5:
        out.append(Bottleneck(cls=BottleneckClass.occupancy, source=source, numbers=nums, rationale=[f"{where}: {waves:.2f} waves per SM: the grid under-fills the GPU"]))
    if dram >= 60 or dram >= sm:
        cls, why = BottleneckClass.memory, f"DRAM throughput {dram:.0f}% of peak vs SM {sm:.0f}%"
    else:
        cls, why = BottleneckClass.compute, f"SM throughput {sm:.0f}% of peak vs DRAM {dram:.0f}%"
    if max(dram, sm) < 40 and not any(b.cls == BottleneckClass.occupancy for b in out):
        out.append(Bottleneck(cls=BottleneckClass.occupancy, source=source, numbers=nums, rationale=[f"{where}: neither DRAM ({dram:.0f}%) nor SM ({sm:.0f}%) is busy: latency-bound"]))
    out.append(Bottleneck(cls=cls, source=source, numbers=nums, rationale=[f"{where}: {why}"]))
    return out


def parse_torch_trace(path: Path, kernel: str) -> list[Bottleneck]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ProfileError(f"{path}: not a JSON trace ({str(exc).splitlines()[0]})") from None
    events = data.get("traceEvents") if isinstance(data, dict) else None
    if not isinstance(events, list):
        raise ProfileError(f"{path}: no traceEvents list (expected a torch.profiler Chrome trace)")
    gpu = [e for e in events if isinstance(e, dict) and e.get("cat") == "kernel" and "dur" in e and "ts" in e]
    if not gpu:
        raise ProfileError(f"{path}: the trace has no GPU kernel events (profile with ProfilerActivity.CUDA)")
    mine = [e for e in gpu if kernel in str(e.get("name", ""))] or gpu
    mine.sort(key=lambda e: e["ts"])
    busy = sum(e["dur"] for e in mine)
    span = mine[-1]["ts"] + mine[-1]["dur"] - mine[0]["ts"]
    mean = busy / len(mine)
    idle = 1 - busy / span if span > 0 else 0.0
    nums = {"duration_us": round(mean, 3), "launches": len(mine), "gpu_idle_fraction": round(idle, 3)}
    out = []
    if len(mine) > 1 and idle > 0.5:
        cls = BottleneckClass.launch if mean < 20 else BottleneckClass.host
        out.append(Bottleneck(cls=cls, source="torch-trace", numbers=nums, rationale=[
            f"trace: the GPU is idle {idle:.0%} of the time between {len(mine)} launches of {mean:.1f} µs: the host cannot keep it fed"]))
    if mean < 5:
        out.append(Bottleneck(cls=BottleneckClass.launch, source="torch-trace", numbers=nums, rationale=[f"trace: {mean:.2f} µs per launch"]))
    if not out:
        out.append(Bottleneck(cls=BottleneckClass.memory, source="torch-trace", numbers=nums, rationale=[
            f"trace: {mean:.1f} µs per launch, GPU busy {1 - idle:.0%}: the trace alone cannot split memory from compute; estimate kept for that"]))
    return out


def parse_evidence(path: Path) -> list[Bottleneck]:
    try:
        bundle = EvidenceBundle.model_validate_json(path.read_text(encoding="utf-8"))
    except Exception as exc:
        raise ProfileError(f"{path}: not an evidence bundle ({str(exc).splitlines()[0]})") from None
    out = []
    for c in bundle.checks:
        if c.layer == "partition" and c.passed is False:
            out.append(Bottleneck(cls=BottleneckClass.numerics, source="evidence", rationale=[f"evidence: {c.name} failed: {c.reason}"]))
        frac = c.details.get("bandwidth_fraction") if c.layer == "performance" else None
        if isinstance(frac, (int, float)):
            cls = BottleneckClass.memory if frac >= 0.5 else BottleneckClass.occupancy
            out.append(Bottleneck(cls=cls, source="evidence", numbers={"bandwidth_fraction": frac}, rationale=[
                f"evidence: {c.name} reached {frac:.0%} of the measured copy bandwidth at {c.shape}"]))
    if not out:
        raise ProfileError(f"{path}: the bundle has no performance or partition results to classify from")
    return out


def load_profile(path: Path, kernel: str) -> list[Bottleneck]:
    if not path.exists():
        raise ProfileError(f"{path}: no such profile")
    if path.suffix in (".ncu-rep", ".ncu-repz"):
        return parse_ncu_report(path, kernel)
    head = path.read_text(encoding="utf-8", errors="replace")[:4096].lstrip()
    if head.startswith("{"):
        if '"traceEvents"' in head or "traceEvents" in path.read_text(encoding="utf-8", errors="replace")[:200000]:
            return parse_torch_trace(path, kernel)
        return parse_evidence(path)
    if '"ID"' in head or path.suffix == ".csv":
        return parse_ncu_csv(path, kernel)
    raise ProfileError(f"{path}: unknown profile format (expected ncu CSV, torch.profiler JSON trace, or an evidence bundle)")


def apply_profile(analysis: Analysis, path: Path, kernel: str) -> Analysis:
    measured = load_profile(path, kernel)
    static = [b for b in [analysis.primary, *analysis.others] if b.cls in _STATIC]
    ordered = measured + [b for b in static if b.cls not in {m.cls for m in measured}]
    return Analysis(kernel=analysis.kernel, primary=ordered[0], others=ordered[1:], gpu=analysis.gpu,
                    numbers={**analysis.numbers, **ordered[0].numbers}, measured=True, sizes=analysis.sizes)
