"""Performance: baseline vs candidate, interleaved in one process, on a GPU only.

For each performance shape both implementations are captured in CUDA graphs of
`inner` launches, each launch preceded by zeroing a flush buffer twice the L2
size (so every launch starts with a cold L2). A third graph holds the flushes
alone; its time is subtracted (timing.py). Rounds alternate which implementation runs
first; the per-round ratio is baseline time / candidate time (> 1: faster), and
the bundle reports its median with a bootstrap 95% interval. The timing runs
where the implementations live (the gate's child process for a candidate), and
what the timed graphs computed is checked against the reference on sampled
rounds (first, middle, last): a candidate fast only when unchecked is caught.

Acceptance (per op, `spec.acceptance`): no shape's median ratio below
1 - max_slowdown_any_shape, and the geometric mean over shapes not measurably
below min_speedup (the upper end of its 95% interval reaches it). A pattern that buys
accuracy with time (Pattern.max_cost > 1) relaxes both to its allowance. Achieved
bandwidth (memory-bound ops) or FLOP rate (compute-bound) is reported as a
fraction of a device-to-device copy or a torch.matmul measured on the spot.

Without a GPU (or under TRITON_INTERPRET=1) nothing is timed: an interpreter
timing says nothing about a GPU.
"""
from __future__ import annotations

import math
import os
from typing import Any, Callable

import numpy as np

import torch

from patterns.core.records import CheckResult
from patterns.core.stats import NOISE_FLOOR, bootstrap_ci
from patterns.core.compare import first_mismatch, tolerances
from patterns.validation.loader import Impl
from patterns.validation.runner import active_dtypes, call_reference, collect, shape_label
from patterns.validation import timing
from patterns.validation.timing import replay_ms
from patterns.core.opspec import Acceptance, OpSpec

MIN_ROUNDS = 10


def gpu_unavailable_reason(device: str) -> str:
    if not device.startswith("cuda") or not torch.cuda.is_available():
        return "no CUDA device here"
    if os.environ.get("TRITON_INTERPRET") == "1":
        return "TRITON_INTERPRET=1: kernels run on the interpreter"
    return ""


def needs_gpu(why: str) -> CheckResult:
    return CheckResult(name="speed", layer="performance", passed=None, reason=f"performance: needs GPU ({why}; interpreter timings are never reported)")


def time_interleaved(fns: dict[str, Callable[[], Any]], device: str, rounds: int, inner: int | None = None) -> tuple[dict[str, np.ndarray], dict[str, int]]:
    """timing.time_interleaved for trusted code in this process (the GPU benchmark), times as arrays."""
    times, inners = timing.time_interleaved(fns, device, rounds, inner)
    return {name: np.array(v) for name, v in times.items()}, inners


def measure_shape(
    spec: OpSpec, baseline: Impl, candidate: Impl, shape: dict, dtype: str, device: str, rounds: int, reference: Callable[..., Any] | None = None
) -> dict[str, Any]:
    """Time both where they run; with `reference`, check what the timed graphs computed on sampled rounds
    (`timed_output_mismatch` names the first wrong one)."""
    inputs = spec.make_inputs(dict(shape), dtype, spec.seeds[0], device)
    rounds = max(rounds, MIN_ROUNDS)
    sampled = sorted({0, rounds // 2, rounds - 1})
    # restored before every timed launch: the in-place inputs and the scratch ones too (a kernel that
    # works in its input's memory, as Liger's rope does when .contiguous() is a no-op, would otherwise
    # read its own last result on each replay, and the timed output would drift from the reference)
    restored = tuple(dict.fromkeys((*spec.inplace, *spec.scratch)))
    timed = candidate.host.time(["baseline", "candidate"], inputs, rounds, restored, sampled)
    times, inner = timed["times"], timed["inners"]["baseline"]
    tb, tc = np.array(times["baseline"]), np.array(times["candidate"])
    ratios = tb / tc
    lo, hi = bootstrap_ci(ratios)
    out = {
        "baseline_us": float(np.median(tb) * 1e3),
        "candidate_us": float(np.median(tc) * 1e3),
        "ratio": float(np.median(ratios)),
        "ci95": [lo, hi],
        "rounds": len(ratios),
        "launches_per_graph": inner,
        "ratios": [float(x) for x in ratios],
        "checked_rounds": sampled if reference is not None else [],
    }
    if reference is not None:
        want = call_reference(spec, reference, inputs)
        per_output = tolerances(spec, want, dtype)
        for key, sample in sorted(timed["samples"].items()):
            r, role = key.split(":")
            if role != "candidate":
                continue
            args = {**inputs, **sample["args"]}
            try:
                got = collect(spec, sample["ret"], args)
                bad = first_mismatch(got, want, per_output)
            except Exception as e:  # noqa: BLE001 - a malformed timed result is a wrong one
                out["timed_output_mismatch"] = f"round {r}: {e}"
                break
            if bad is not None:
                out["timed_output_mismatch"] = f"round {r}: {bad.describe()}"
                break
    if spec.bytes_moved is not None:
        nbytes = spec.bytes_moved(dict(shape), dtype)
        out["baseline_GBps"] = nbytes / (out["baseline_us"] * 1e-6) / 1e9
        out["candidate_GBps"] = nbytes / (out["candidate_us"] * 1e-6) / 1e9
    if spec.flops is not None:
        nflops = spec.flops(dict(shape), dtype)
        out["baseline_TFLOPs"] = nflops / (out["baseline_us"] * 1e-6) / 1e12
        out["candidate_TFLOPs"] = nflops / (out["candidate_us"] * 1e-6) / 1e12
    return out


def device_ceilings(device: str, dtype: str) -> dict[str, float]:
    """A device-to-device copy's bandwidth and a large torch.matmul's rate, measured now."""
    n = 1 << 28  # 256 MiB, far beyond L2
    src = torch.empty(n, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    graph = torch.cuda.CUDAGraph()
    dst.copy_(src)
    torch.cuda.synchronize()
    with torch.cuda.graph(graph):
        for _ in range(10):
            dst.copy_(src)
    times = sorted(replay_ms(graph) / 10 for _ in range(10))
    copy_gbps = 2 * n / (times[len(times) // 2] * 1e-3) / 1e9
    del src, dst, graph
    mm_dtype = getattr(torch, dtype) if dtype in ("float16", "bfloat16") else torch.bfloat16
    m = 8192
    a = torch.randn(m, m, device=device, dtype=mm_dtype)
    b = torch.randn(m, m, device=device, dtype=mm_dtype)
    for _ in range(3):
        a @ b
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(10):
        a @ b
    end.record()
    end.synchronize()
    tflops = 2 * m**3 / (start.elapsed_time(end) / 10 * 1e-3) / 1e12
    return {"copy_GBps": copy_gbps, "matmul_TFLOPs": tflops, "matmul_dtype": str(mm_dtype).removeprefix("torch.")}


def check_performance(
    spec: OpSpec, baseline: Impl, candidate: Impl, device: str, rounds: int = MIN_ROUNDS, acceptance: Acceptance | None = None,
    reference: Callable[..., Any] | None = None,
) -> tuple[list[CheckResult], dict[str, Any]]:
    why = gpu_unavailable_reason(device)
    if why:
        return [needs_gpu(why)], {}
    dtypes = active_dtypes(spec, device)
    shapes = spec.gpu_shapes or spec.shapes
    ceilings = device_ceilings(device, dtypes[0])
    acc = acceptance or spec.acceptance
    checks, per_round = [], []
    for dtype in dtypes:
        for shape in shapes:
            m = measure_shape(spec, baseline, candidate, shape, dtype, device, rounds, reference)
            if "candidate_GBps" in m:
                m["candidate_fraction_of_copy"] = m["candidate_GBps"] / ceilings["copy_GBps"]
                m["baseline_fraction_of_copy"] = m["baseline_GBps"] / ceilings["copy_GBps"]
            if "candidate_TFLOPs" in m:
                m["candidate_fraction_of_matmul"] = m["candidate_TFLOPs"] / ceilings["matmul_TFLOPs"]
                m["baseline_fraction_of_matmul"] = m["baseline_TFLOPs"] / ceilings["matmul_TFLOPs"]
            m["bound"] = spec.bound
            per_round.append(np.array(m["ratios"]))
            floor = 1 - acc.max_slowdown_any_shape
            label = shape_label(shape, dtype)
            ok = m["ratio"] >= floor and "timed_output_mismatch" not in m
            ci = f"95% CI [{m['ci95'][0]:.3f}, {m['ci95'][1]:.3f}]"
            reason = f"performance: the timed runs' output is wrong ({m['timed_output_mismatch']}; {label})" if "timed_output_mismatch" in m else (
                f"performance: ratio {m['ratio']:.3f} ({ci}; {m['baseline_us']:.1f} us -> {m['candidate_us']:.1f} us; {label})"
                if ok
                else f"performance: {(1 - m['ratio']) * 100:.1f}% slower than the baseline, more than the {acc.max_slowdown_any_shape * 100:.0f}% allowed (ratio {m['ratio']:.3f}, {ci}; {label})"
            )
            checks.append(CheckResult(name="speed", layer="performance", passed=ok, reason=reason, shape={**shape, "dtype": dtype}, details=m))
    rounds_n = min(len(r) for r in per_round)
    geo = np.exp(np.mean([np.log(r[:rounds_n]) for r in per_round], axis=0))  # per-round geometric mean over shapes
    lo, hi = bootstrap_ci(geo)
    med = float(np.median(geo))
    ok = hi >= acc.min_speedup * (1 - NOISE_FLOOR)
    checks.append(
        CheckResult(
            name="speed overall",
            layer="performance",
            passed=ok,
            reason=f"performance: geometric-mean ratio {med:.3f} (95% CI [{lo:.3f}, {hi:.3f}]) "
            + ("meets" if ok else "is measurably below")
            + f" the required {acc.min_speedup:g}x over {len(per_round)} shapes",
            details={"geomean_ratio": med, "ci95": [lo, hi], "min_speedup": acc.min_speedup, "bound": spec.bound},
        )
    )
    return checks, ceilings
