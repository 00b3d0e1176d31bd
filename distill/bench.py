"""Benchmark: distill the three upstream wheels cold (empty facts cache) and warm (unchanged sources).

    python -m patterns.distill.bench [--library DIR] [--jobs N] [--seed-wheels DIR] [--detections FILE.md]

The wheels come from the user cache (`pip download --no-deps` once; --seed-wheels
copies already-downloaded wheels there instead). Each run is a child process:
wall time is measured around it, peak memory is the child's own maximum RSS
plus the largest worker's (resource.getrusage, children included).
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

REQUIREMENTS = ["fla-core==0.6.0", "sglang==0.5.23", "sgl-deep-gemm==0.2.5"]
_COLUMN_ORDER = ["sglang", "fla", "deepgemm"]


def _child(args: argparse.Namespace) -> None:
    from patterns.distill.cache import FactsCache
    from patterns.distill.run import distill
    from patterns.distill.scan import file_kind

    from patterns.core.library import load_library

    entries = load_library(Path(args.library) if args.library else None)
    t = time.perf_counter()
    result = distill(args.sources, entries, FactsCache(root=Path(args.facts)), jobs=args.jobs)
    seconds = time.perf_counter() - t
    r = result.report
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    self_kb, kids_kb = me.ru_maxrss, kids.ru_maxrss
    print(json.dumps({
        "seconds": seconds, "self_mb": self_kb / 1024, "workers_mb": kids_kb / 1024,
        # CPU time of this process and its workers: what the run costs whatever else the machine runs
        "cpu_s": me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime,
        "files": sum(p.files_scanned for p in r.projects), "extracted": sum(p.files_extracted for p in r.projects),
        "cached": r.cache_hits, "kernels": sum(p.kernels for p in r.projects), "native": sum(p.native_functions for p in r.projects),
        "hits": len(result.detections.hits), "drafts": len(result.drafts),
        "per_project": {p.project: {"version": p.version, "seconds": p.seconds, "detections": p.detections, "skipped": p.skipped} for p in r.projects},
        "native_hits": dict(Counter(f"{h.pattern}/{h.project}" for h in result.detections.hits if file_kind(h.path) == "native")),
        "patterns": [e.id for e in entries],
    }))


def detections_table(data: dict) -> str:
    """Markdown: upstream locations per library pattern and project (C++/CUDA ones in brackets)."""
    from patterns.distill.sources import PROJECTS

    projects = sorted(data["per_project"], key=lambda p: (_COLUMN_ORDER.index(p) if p in _COLUMN_ORDER else len(_COLUMN_ORDER), p))
    dists = {PROJECTS[req.split("==")[0]]: req.split("==")[0] for req in REQUIREMENTS}
    head = [f"{dists.get(p, p)} {data['per_project'][p]['version']}" for p in projects]
    rows = [f"| pattern | {' | '.join(head)} |", f"|---|{'---:|' * len(projects)}"]
    totals = Counter()
    for pid in sorted(data["patterns"]):
        cells = []
        for p in projects:
            n = data["per_project"][p]["detections"].get(pid, 0)
            native = data["native_hits"].get(f"{pid}/{p}", 0)
            totals[p] += n
            cells.append(f"{n} ({native} C++/CUDA)" if native else str(n))
        rows.append(f"| {pid} | {' | '.join(cells)} |")
    rows.append(f"| **all patterns** | {' | '.join(str(totals[p]) for p in projects)} |")
    return "\n".join(rows) + "\n"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m patterns.distill.bench", description=__doc__.splitlines()[0])
    ap.add_argument("--library", default=None, help="library folder (default: the bundled one)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--seed-wheels", default=None, help="folder with already-downloaded wheels to copy into the user cache")
    ap.add_argument("--facts-dir", default=None, help="facts cache to use (emptied first) and keep afterwards; default: a temporary one")
    ap.add_argument("--runs", default="cold,warm", help="runs in order, e.g. 'cold,warm' or 'warm,warm' (keeps --facts-dir)")
    ap.add_argument("--detections", default=None, metavar="FILE.md", help="write the table of upstream locations per pattern and project (Markdown)")
    ap.add_argument("--json", default=None, metavar="FILE.json", help="also write the runs (wall, CPU, memory, counts, machine load) as JSON")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--facts", default=None, help=argparse.SUPPRESS)
    ap.add_argument("sources", nargs="*", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        _child(args)
        return

    from patterns.distill.sources import cache_dir, download
    from rich.console import Console
    from rich.table import Table

    console = Console() if sys.stdout.isatty() else Console(width=132)  # a saved run keeps its table unwrapped
    if args.seed_wheels:
        dest = cache_dir() / "upstream"
        dest.mkdir(parents=True, exist_ok=True)
        for whl in Path(args.seed_wheels).glob("*.whl"):
            if not (dest / whl.name).exists():
                shutil.copy2(whl, dest / whl.name)
    wheels = [str(download(req)) for req in REQUIREMENTS]
    runs = [r.strip() for r in args.runs.split(",") if r.strip()]
    if args.facts_dir:
        facts = Path(args.facts_dir)
        if "cold" in runs:
            shutil.rmtree(facts, ignore_errors=True)
        facts.mkdir(parents=True, exist_ok=True)
    else:
        facts = Path(tempfile.mkdtemp(prefix="patterns-bench-facts-"))
    rows = []
    try:
        for label in runs:
            cmd = [sys.executable, "-m", "patterns.distill.bench", "--child", "--facts", str(facts), "--jobs", str(args.jobs)]
            if args.library:
                cmd += ["--library", args.library]
            t = time.perf_counter()
            proc = subprocess.run([*cmd, *wheels], capture_output=True, text=True)
            wall = time.perf_counter() - t
            if proc.returncode != 0:
                console.print(proc.stderr[-2000:], markup=False)
                raise SystemExit(f"{label} run failed (exit {proc.returncode})")
            data = json.loads(proc.stdout.strip().splitlines()[-1])
            rows.append((label, wall, data))
    finally:
        if not args.facts_dir:
            shutil.rmtree(facts, ignore_errors=True)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    table = Table(title=f"patterns distill: {', '.join(REQUIREMENTS)} ({os.cpu_count()} cores, {args.jobs} jobs, load {load:.1f})", title_justify="left")
    for col in ("run", "wall s", "CPU s", "peak RSS MB (main + worker)", "files", "extracted", "from cache", "kernels", "native fns", "locations", "drafts"):
        table.add_column(col, justify="right" if col != "run" else "left")
    for label, wall, d in rows:
        table.add_row(label, f"{wall:.1f}", f"{d['cpu_s']:.1f}", f"{d['self_mb']:.0f} + {d['workers_mb']:.0f} = {d['self_mb'] + d['workers_mb']:.0f}", str(d["files"]),
                      str(d["extracted"]), str(d["cached"]), str(d["kernels"]), str(d["native"]), str(d["hits"]), str(d["drafts"]))
    console.print(table)
    for label, wall, d in rows:
        limit = 60.0 if label == "cold" else 5.0
        peak = d["self_mb"] + d["workers_mb"]
        ok = wall < limit and peak < 2048
        console.print(f"{label}: {wall:.1f} s (target < {limit:.0f} s), peak {peak:.0f} MB (target < 2048 MB): {'OK' if ok else 'OVER'}")
    if args.json and rows:
        from patterns.core.files import write_atomic

        write_atomic(Path(args.json), json.dumps({
            "requirements": REQUIREMENTS, "cores": os.cpu_count(), "jobs": args.jobs, "load_average_1min": load,
            "targets": {"cold_s": 60, "warm_s": 5, "peak_mb": 2048},
            "runs": [{"run": label, "wall_s": round(wall, 2), "cpu_s": round(d["cpu_s"], 2), "peak_mb": round(d["self_mb"] + d["workers_mb"]),
                      **{k: d[k] for k in ("files", "extracted", "cached", "kernels", "native", "hits", "drafts")}} for label, wall, d in rows],
        }, indent=1) + "\n")
        console.print(f"wrote {args.json}")
    if args.detections and rows:
        from patterns.core.files import write_atomic

        intro = (f"# Upstream locations per library pattern\n\nGenerated by `python -m patterns.distill.bench --detections {args.detections}` "
                 f"from {', '.join(REQUIREMENTS)}: for each library pattern, the upstream kernels and functions where its "
                 "`present_when` holds (in brackets: how many of them are C++/CUDA). `patterns distill ... --write` merges "
                 "up to `--cap` of them per project into the pattern's evidence.\n\n")
        write_atomic(Path(args.detections), intro + detections_table(rows[0][2]))
        console.print(f"wrote {args.detections}")


if __name__ == "__main__":
    main()
