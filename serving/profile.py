"""Where a decode step's time goes: a torch.profiler trace, split by op.

    prof = profile_steps(lambda: dec.step(), steps=4, ops=dec.ops, device="cuda", trace=Path("t.json"))
    shares(prof, step_ms=3.1)     # [OpShare(op="decode_attention", ms_per_step=1.9, share=0.61), ..., "glue", "idle"]

On a GPU the trace holds every kernel the device ran, also those replayed from
a CUDA graph (a replay has no per-op CPU events, so ops are found by their
kernels' names: the Triton kernels defined in the module of each op's
launcher, `triton_kernels`). Kernels of no op are the PyTorch glue between
ops (norms, residual adds, the KV write, the argmax); the rest of the step is
the device idle between kernels. Kernel times are unchanged by the profiler;
the shares are taken against the step time of the timed, unprofiled rounds.

On a CPU (the interpreter, or the PyTorch references) there are no device
kernels: each op's calls are profiler ranges (`BoundOp.annotate`), and the
rest of the step is glue. The profiler slows host code down, so there the
shares are taken of the profiled steps' own wall time (and scaled to the timed
step). Those times are the interpreter's, never a GPU claim.

The trace is Chrome trace JSON, opened by https://ui.perfetto.dev.
"""
from __future__ import annotations

import json
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

import torch

from patterns.core.records import OpShare

GLUE, IDLE = "glue", "idle"
DEVICE_WORK = ("kernel", "gpu_memcpy", "gpu_memset")  # Kineto's categories of what the device ran


def triton_kernels(fn: Callable) -> tuple[str, ...]:
    """Names of the Triton kernels defined beside an op's launcher (autotuned and heuristic wrappers unwrapped)."""
    names = []
    for obj in getattr(fn, "__globals__", {}).values():  # the launcher's module namespace
        if not type(obj).__module__.startswith("triton."):
            continue
        while hasattr(obj, "fn"):  # Autotuner -> JITFunction -> the Python function
            obj = obj.fn
        name = getattr(obj, "__name__", "")
        if name and name not in names:
            names.append(name)
    return tuple(names)


@dataclass
class Profile:
    events: list[dict[str, Any]]
    steps: int
    wall_ms: float  # the profiled steps' wall time, per step
    kernels: dict[str, tuple[str, ...]]  # op -> its Triton kernels' names
    ops: tuple[str, ...]


def profile_steps(step: Callable[[], None], steps: int, ops: Mapping[str, Any], device: str, trace: Path | None = None) -> Profile:
    """Run `step` `steps` times under torch.profiler; the Chrome trace goes to `trace` (a temporary file if None)."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.startswith("cuda") else [])
    for op in ops.values():
        op.annotate = True
    try:
        with profile(activities=activities) as prof:
            t0 = time.perf_counter()
            for _ in range(steps):
                step()
            if device.startswith("cuda"):
                torch.cuda.synchronize(device)
            wall_ms = 1e3 * (time.perf_counter() - t0) / steps
    finally:
        for op in ops.values():
            op.annotate = False
    with tempfile.TemporaryDirectory() as tmp:
        path = trace or Path(tmp) / "trace.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        prof.export_chrome_trace(str(path))
        events = json.loads(path.read_text()).get("traceEvents", [])
    return Profile(events=events, steps=steps, wall_ms=wall_ms, kernels={name: op.kernels for name, op in ops.items()}, ops=tuple(ops))


def op_of(kernel: str, kernels: Mapping[str, tuple[str, ...]]) -> str:
    """The op a device kernel belongs to, by name (a profiler may append a suffix to a Triton kernel's name)."""
    for op, names in kernels.items():
        if any(kernel == n or kernel.startswith(n + "_") for n in names):
            return op
    return GLUE


def shares(prof: Profile, step_ms: float) -> tuple[str, list[OpShare]]:
    """(source, shares per op) for one step of `step_ms`: every op, then glue and idle (see the module doc)."""
    per_op = dict.fromkeys(prof.ops, 0.0)
    device = [e for e in prof.events if e.get("ph") == "X" and e.get("cat") in DEVICE_WORK]
    if device:
        source, glue = "device", 0.0
        for e in device:
            op = op_of(e["name"], prof.kernels)
            if op == GLUE:
                glue += e["dur"]
            else:
                per_op[op] += e["dur"]
        per_op = {op: us / 1e3 / prof.steps for op, us in per_op.items()}
        glue_ms = glue / 1e3 / prof.steps
        idle_ms = max(step_ms - sum(per_op.values()) - glue_ms, 0.0)
    else:
        source = "host"
        for e in prof.events:
            if e.get("ph") == "X" and e.get("cat") == "user_annotation" and e.get("name") in per_op:
                per_op[e["name"]] += e["dur"]
        scale = step_ms / prof.wall_ms if prof.wall_ms > 0 else 0.0  # profiled host time, to the timed step's
        per_op = {op: us / 1e3 / prof.steps * scale for op, us in per_op.items()}
        glue_ms, idle_ms = max(step_ms - sum(per_op.values()), 0.0), 0.0
    rows = [*per_op.items(), (GLUE, glue_ms), (IDLE, idle_ms)]
    return source, [OpShare(op=op, ms_per_step=ms, share=ms / step_ms if step_ms > 0 else 0.0) for op, ms in rows]
