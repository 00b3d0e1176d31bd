"""Isolation's overhead on the perf gate: the same timed section in the gate's child process and in-process.

For each op, the baseline and one library rewrite (evidence/gpu/h200-<op>/candidate-*.py,
the baseline itself where there is none) are loaded twice in this one driver process's
reach: in a sandbox.Child (how the gate runs candidates) and in sandbox.InProcess (how
it ran them before). Then `REPS` repetitions alternate the two arms (child first on odd
repetitions), each one `perf.check_performance` (CUDA graphs, L2 flush, interleaved
rounds, sampled timed outputs checked against the reference). Per shape it writes the
speed ratio (baseline / candidate) each arm measured, and the arms' ratios both ways
(child / in-process and in-process / child), to $OUT/overhead.json and overhead.md.

Without a GPU (the CPU path, for CI) nothing is timed: both arms load and call each
implementation once at the op's first CPU shape and compare with the reference.

    OUT=/tmp/out python evidence/gpu/h200-gate/overhead.py [op ...]
"""
from __future__ import annotations

import json
import math
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch

from patterns.core.compare import first_mismatch, tolerances
from patterns.core.ops import available_ops, load_reference, load_spec, source_path
from patterns.validation.loader import load_impl
from patterns.validation.perf import check_performance
from patterns.validation.runner import active_dtypes, call, call_reference
from patterns.validation.sandbox import Child, InProcess, Limits

ROOT = Path(__file__).resolve().parents[3]
CANDIDATES = {
    "kda_decode": "evidence/gpu/h200-kda_decode/candidate-fused.py",
    "decode_attention": "evidence/gpu/h200-decode_attention/candidate-split-KV.py",
    "matmul": "evidence/gpu/h200-matmul/candidate-grouped.py",
    "cp_state_merge": "evidence/gpu/h200-cp_state_merge/candidate-tf32x3.py",
}


def arms(spec, device: str) -> dict:
    base_file = source_path(spec, spec.baseline)
    cand_file = ROOT / CANDIDATES[spec.name] if spec.name in CANDIDATES else base_file
    out = {}
    for arm, host in (("child", Child(device, Limits(timeout_s=3600, call_timeout_s=600))), ("in-process", InProcess(device))):
        base, _ = load_impl(spec, "baseline", base_file, host)
        cand, _ = load_impl(spec, "candidate", cand_file, host)
        out[arm] = (host, base, cand)
    return out, (str(cand_file.relative_to(ROOT)) if cand_file.is_relative_to(ROOT) else str(cand_file))


def cpu_path(spec, loaded: dict) -> dict:
    dtype, shape = active_dtypes(spec, "cpu")[0], dict(spec.shapes[0])
    inputs = spec.make_inputs(dict(shape), dtype, spec.seeds[0], "cpu")
    want = call_reference(spec, load_reference(spec), inputs)
    result = {}
    for arm, (_, base, cand) in loaded.items():
        for impl in (base, cand):
            got, _ = call(spec, impl, inputs, "cpu")
            bad = first_mismatch(got, want, tolerances(spec, want, dtype))
            result[f"{arm} {impl.role}"] = "matches the reference" if bad is None else bad.describe()
    return result


def gpu_path(spec, loaded: dict, reps: int, rounds: int) -> dict:
    per_arm: dict[str, dict[str, list[float]]] = {arm: {} for arm in loaded}
    wrong: list[str] = []
    for rep in range(reps):
        order = list(loaded) if rep % 2 == 0 else list(loaded)[::-1]
        for arm in order:
            _, base, cand = loaded[arm]
            checks, _ = check_performance(spec, base, cand, "cuda", rounds, reference=load_reference(spec))
            for c in checks:
                if c.name != "speed":
                    continue
                key = ",".join(f"{k}={v}" for k, v in c.shape.items())
                per_arm[arm].setdefault(key, []).append(c.details["ratio"])
                if "timed_output_mismatch" in c.details:
                    wrong.append(f"{arm} {key}: {c.details['timed_output_mismatch']}")
    shapes = {}
    for key in per_arm["child"]:
        child, inproc = float(np.median(per_arm["child"][key])), float(np.median(per_arm["in-process"][key]))
        shapes[key] = {
            "ratio_child": child, "ratio_in_process": inproc,
            "child_over_in_process": child / inproc, "in_process_over_child": inproc / child,
            "ratios_child": per_arm["child"][key], "ratios_in_process": per_arm["in-process"][key],
        }
    return {"shapes": shapes, "timed_output_mismatches": wrong}


def write(out: Path, report: dict, reps: int, rounds: int) -> None:
    (out / "overhead.json").write_text(json.dumps(report, indent=1))
    lines = [f"# Isolation overhead on the perf gate ({report['device']})", "",
             f"{reps} repetitions per arm, alternating, {rounds} rounds each; ratio = baseline time / candidate time.", "",
             "| op | shape | ratio child | ratio in-process | child / in-process |", "|---|---|---|---|---|"]
    for op, entry in report["ops"].items():
        for key, s in entry.get("shapes", {}).items():
            lines.append(f"| {op} | {key} | {s['ratio_child']:.3f} | {s['ratio_in_process']:.3f} | {s['child_over_in_process']:.3f} |")
        if "calls" in entry or "error" in entry:
            lines.append(f"| {op} | (cpu path) | {json.dumps(entry.get('calls', entry.get('error')))} | | |")
    (out / "overhead.md").write_text("\n".join(lines) + "\n")


def main(ops: list[str]) -> int:
    out = Path(os.environ.get("OUT", "."))
    out.mkdir(parents=True, exist_ok=True)
    gpu = torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") != "1"
    device = "cuda" if gpu else "cpu"
    if not gpu:
        os.environ["TRITON_INTERPRET"] = "1"
        from patterns.core import interpreter

        interpreter.install_cpu_shims()
    reps, rounds = int(os.environ.get("REPS", 2)), int(os.environ.get("ROUNDS", 20))
    report = {"device": torch.cuda.get_device_name() if gpu else "cpu (interpreter: nothing timed)", "reps": reps, "rounds": rounds, "ops": {}}
    for op in ops:
        spec = load_spec(op)
        if gpu and not spec.gpu_shapes:
            continue
        t0 = time.monotonic()
        loaded, cand = arms(spec, device)
        try:
            entry = gpu_path(spec, loaded, reps, rounds) if gpu else {"calls": cpu_path(spec, loaded)}
        except Exception as e:  # noqa: BLE001 - one op's failure is recorded, the others still run
            entry = {"error": f"{type(e).__name__}: {e}"}
        finally:
            for host, _, _ in loaded.values():
                host.close()
        entry["candidate"], entry["seconds"] = cand, round(time.monotonic() - t0, 1)
        report["ops"][op] = entry
        print(json.dumps({op: entry})[:2000], flush=True)
        write(out, report, reps, rounds)  # after every op: a run cut short keeps what it measured
    failed = [op for op, e in report["ops"].items() if "error" in e or e.get("timed_output_mismatches")
              or any("matches" not in v for v in e.get("calls", {}).values())]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] or available_ops()))
