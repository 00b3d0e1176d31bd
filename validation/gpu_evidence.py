"""Run the full gate for every op's baseline on a GPU and write the bundles.

    python -m patterns.validation.gpu_evidence --out DIR [--ops kda_decode,matmul] [--rounds 15]

Each op's baseline is validated against itself (a fresh import of the same
file), so the speed ratio is ~1 and the interval shows the measurement's noise
on this machine; what matters here is the correctness, partition and integrity
evidence on real hardware and the achieved fraction of a measured copy
bandwidth (memory-bound ops) or torch.matmul rate (compute-bound ops).
Writes one bundle per op and `DIR/summary.md`; exits 1 if any gate failed, 2
without a GPU.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

from patterns.core.records import EvidenceBundle


def summary_rows(bundle: EvidenceBundle) -> list[dict[str, str]]:
    rows = []
    for c in bundle.checks:
        if c.name != "speed" or c.passed is None:
            continue
        d = c.details
        if d.get("bound") == "compute" and "candidate_fraction_of_matmul" in d:
            achieved = f"{d['candidate_TFLOPs']:.1f} TFLOP/s ({d['candidate_fraction_of_matmul']:.0%} of matmul)"
        elif "candidate_fraction_of_copy" in d:
            achieved = f"{d['candidate_GBps']:.0f} GB/s ({d['candidate_fraction_of_copy']:.0%} of copy)"
        else:
            achieved = "no traffic/FLOP model"
        rows.append(
            {
                "op": bundle.op,
                "shape": ",".join(f"{k}={v}" for k, v in c.shape.items()),
                "time": f"{d['candidate_us']:.2f} us",
                "ratio": f"{d['ratio']:.3f} [{d['ci95'][0]:.3f}, {d['ci95'][1]:.3f}]",
                "achieved": achieved,
            }
        )
    if not rows:
        failing = [c.reason for c in bundle.checks if c.passed is False]
        rows.append({"op": bundle.op, "shape": "", "time": "", "ratio": "", "achieved": failing[0] if failing else "not measured"})
    return rows


def main(argv: list[str] | None = None) -> int:
    import torch

    from patterns.validation.bundle import verdict
    from patterns.validation.gate import validate
    from patterns.core.ops import available_ops

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="folder for the bundles")
    parser.add_argument("--ops", default="", help="comma-separated ops (default: every op under kernels/)")
    parser.add_argument("--rounds", type=int, default=15, help="interleaved timing rounds (at least 10)")
    args = parser.parse_args(argv)
    console = Console()
    if not torch.cuda.is_available():
        console.print("error: no CUDA device: this script only runs on a GPU machine", markup=False)
        return 2
    ops = [o for o in args.ops.split(",") if o] or available_ops()
    rows, verdicts = [], {}
    for op in ops:
        console.print(f"[bold]{op}[/]: validating the baseline on {torch.cuda.get_device_name()}")
        bundle = validate(op, None, device="cuda", out_dir=args.out, rounds=args.rounds)
        verdicts[op] = verdict(bundle)
        rows += summary_rows(bundle)
    table = Table(title="GPU evidence: baselines")
    for col in ("op", "shape", "time", "ratio", "achieved"):
        table.add_column(col)
    for r in rows:
        table.add_row(*r.values())
    console.print(table)
    lines = ["# GPU evidence: baselines", ""]
    lines += [f"- {op}: {v}" for op, v in verdicts.items()]
    lines += ["", "| op | shape | time | ratio [95% CI] | achieved |", "| --- | --- | --- | --- | --- |"]
    lines += ["| " + " | ".join(r.values()) + " |" for r in rows]
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "summary.md").write_text("\n".join(lines) + "\n")
    return 0 if all(v.startswith("pass") for v in verdicts.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
