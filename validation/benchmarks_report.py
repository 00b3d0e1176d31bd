"""BENCHMARKS.md and its roofline plot, generated from the JSON that the GPU benchmark writes.

    python -m patterns.validation.benchmarks_report evidence/gpu/h200-*/ --out BENCHMARKS.md [--plot docs/benchmarks-roofline.png]

Every figure in the page comes from the JSON files found (an <op>.json per case,
from `python -m patterns.benchmark`); nothing is typed in by hand, so
a new GPU run (the agent's accepted candidates, `--candidate OP=PATH`) is
published by running the two commands again. The plot places each op's baseline
and final candidate, at each shape, against the copy bandwidth and bf16 matmul
rate measured in the same runs. What each op's section shows (its title, its
upstream, its shape's entries, its targets) is the op's `kernels/<op>/benchmark.py`.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from patterns.core.files import write_atomic
from patterns.core.ops import benchmarked_ops, load_benchmark, load_spec


class ReportError(ValueError):
    """Bad input: one line naming the file and the problem."""


def load(paths: list[Path]) -> dict[str, list[dict]]:
    """op -> its runs, newest first: the newest is the op's result; older runs add their launch sweeps."""
    found: dict[str, list[dict]] = {}
    files = [f for p in paths for f in (sorted(p.rglob("*.json")) if p.is_dir() else [p])]
    for f in files:
        try:
            data = json.loads(f.read_text())
        except (OSError, json.JSONDecodeError) as e:
            raise ReportError(f"{f}: not readable JSON ({e})") from None
        if not isinstance(data, dict) or "rows" not in data or data.get("op") not in benchmarked_ops():
            continue  # another kind of file in the same folder (an evidence bundle, a sweep)
        data["_path"] = str(f)
        found.setdefault(data["op"], []).append(data)
    if not found:
        raise ReportError(f"{', '.join(map(str, paths))}: no benchmark JSON (an <op>.json with rows) found")
    return {op: sorted(runs, key=lambda d: d.get("created", ""), reverse=True) for op, runs in found.items()}


def _ci(r: dict | None) -> str:
    return f"{r['median']:.2f}× [{r['ci95'][0]:.2f}, {r['ci95'][1]:.2f}]" if r else "–"


def _us(e: dict | None) -> str:
    return f"{e['us']:.1f}" if e and "us" in e else "–"


def _achieved(op: str, e: dict | None) -> str:
    if not e or "us" not in e:
        return "–"
    if load_spec(op).bound == "compute":
        return f"{e['TFLOPs']:.0f} TFLOP/s ({e['fraction_of_matmul']:.0%})"
    return f"{e['GBps']:.0f} GB/s ({e['fraction_of_copy']:.0%})"


def _shape(row: dict) -> str:
    s = row["shape"]
    keys = load_benchmark(row["op"]).shape_keys if row.get("op") else ()
    return ", ".join(f"{k}={s[k]}" for k in keys or tuple(s) if k in s) or row["label"]


def targets(op: str, res: dict) -> list[dict]:
    """Issue #8's targets evaluated on the run's raw numbers by the op's current rules (one place decides them)."""
    return load_benchmark(op).targets(res)


def case_section(op: str, runs: list[dict]) -> list[str]:
    res = runs[0]
    rows = res["rows"]
    for r in rows:
        r["op"] = op
    steps = list(res["steps"])
    final = rows[0]["final"]
    up = load_benchmark(op).upstream
    lines = [f"## {load_benchmark(op).title}", ""]
    lines += [f"Reproduce: `{res['command']}` ({res['rounds']} interleaved rounds; {res['device']}, "
              f"copy {res['ceilings']['copy_GBps']:.0f} GB/s, bf16 matmul {res['ceilings']['matmul_TFLOPs']:.0f} TFLOP/s "
              f"measured in the same process; {', '.join(f'{k} {v}' for k, v in res['environment'].items())}). "
              f"Raw data: `{res['_path']}`.", ""]
    # the main table
    head = ["shape", "baseline µs", f"{final} µs", "limit µs", f"{final} vs baseline"]
    if up:
        head += [f"{up} µs", f"{final} vs {up}"]
    if any("best_upstream_launch" in r for r in rows):
        head += ["FLA best launch", f"{final} vs it"]
    head += ["achieved", "correct"]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        v = r["variants"]
        cells = [_shape(r), _us(v.get("baseline")), _us(v.get(final)), f"{r.get('limit_us', float('nan')):.1f}",
                 _ci(r["ratios"].get(f"{final} vs baseline"))]
        if up:
            cells += [_us(v.get(up)), _ci(r["ratios"].get(f"{final} vs {up}"))]
        if any("best_upstream_launch" in x for x in rows):
            best = r.get("best_upstream_launch")
            cells += [f"{best.removeprefix('FLA ')}: {_us(v.get(best))} µs" if best else "–", _ci(r["ratios"].get(f"{final} vs best upstream launch"))]
        e = v.get(final, {})
        cells += [_achieved(op, e), "yes" if e.get("correct") else f"no: {e.get('mismatch', e.get('error', '?'))}"]
        lines.append("| " + " | ".join(cells) + " |")
    chosen = [f"{_shape(r)}: {c}" for r in rows for c in r["variants"].get(final, {}).get("autotuned", {}).values()]
    if chosen:
        lines += ["", "The autotuner chose " + "; ".join(chosen) + "."]
    lines += ["", "Ratios are per-round time ratios (> 1: the first is faster), median and bootstrap 95% interval; "
              "limit: the model's bytes at the measured copy bandwidth" + (" (FLOPs at the measured matmul rate)" if load_spec(op).bound == "compute" else "") + ".", ""]
    # each step
    if len(steps) > 1:
        lines += ["Each step of the rewrite chain against the baseline:", ""]
        lines += ["| shape | " + " | ".join(f"{s} (`{res['steps'][s]['chain']}`)" for s in steps) + " |", "|---|" + "---|" * len(steps)]
        for r in rows:
            lines.append(f"| {_shape(r)} | " + " | ".join(f"{_us(r['variants'].get(s))} µs, {_ci(r['ratios'].get(f'{s} vs baseline'))}" for s in steps) + " |")
        lines.append("")
    else:
        lines += [f"Candidate: `{res['steps'][final]['chain']}` on `kernels/{op}/baseline.py`.", ""]
    # the partition curve
    part = res.get("partition")
    if part:
        shape = ", ".join(f"{k}={v}" for k, v in part.get("shape", {}).items()) if isinstance(part.get("shape"), dict) else ""
        lines += [f"Partitioned vs unpartitioned ({part['axis']}{', ' + shape if shape else ''}), rel err = max|Δ| / max|reference|, "
                  f"tolerance atol {part['tolerance']['atol']:g} + rtol {part['tolerance']['rtol']:g}:", ""]
        lines += [f"| {part['axis']} | baseline rel err | {final} rel err |", "|---|---|---|"]
        base = {p["n"]: p for p in part["baseline"]}
        for p in part["candidate"]:
            b = base.get(p["n"], {})
            lines.append(f"| {p['n']} | {b.get('rel_err', float('nan')):.1e} ({'pass' if b.get('passed') else 'FAIL'}) | "
                         f"{p.get('rel_err', float('nan')):.1e} ({'pass' if p.get('passed') else 'FAIL'}) |")
        lines.append("")
    # targets
    lines += ["Targets (issue #8):", ""]
    lines += [f"- {'met' if t['met'] else '**missed**'}: {t['what']}: {t['measured']}" for t in targets(op, res)]
    lines.append("")
    # the analysis written beside this run's JSON (a later run in another folder does not inherit it)
    notes = Path(res["_path"]).parent / "NOTES.md"
    if notes.is_file():
        lines += ["### Analysis of this run", "", notes.read_text().strip(), ""]
    for run in runs:
        lines += sweep_table(op, run, current=run is res)
    return lines


def sweep_table(op: str, run: dict, current: bool) -> list[str]:
    """The launch-parameter variants of one run, µs per shape, with the compiled kernels' resources."""
    rows = run["rows"]
    for r in rows:
        r["op"] = op
    sweep = sorted({n for r in rows for n, e in r["variants"].items() if e["role"] in ("sweep", "upstream-sweep")})
    if not sweep:
        return []
    when = "this run" if current else f"an earlier run ({run.get('created', '?')}, `{run['_path']}`, its own candidates at the time)"
    lines = [f"<details><summary>Launch sweep from {when}: {len(sweep)} variants, µs</summary>", ""]
    lines += ["| variant | " + " | ".join(_shape(r) for r in rows) + " | resources (registers, spills, shared bytes, PTX MMA) |",
              "|---|" + "---|" * (len(rows) + 1)]
    for n in [*sweep, *[v for v in rows[0]["variants"] if rows[0]["variants"][v]["role"] in ("baseline", "step")]]:
        res_ = next((r["variants"][n].get("resources") for r in rows if r["variants"].get(n, {}).get("resources")), None)
        cells = []
        for r in rows:
            e = r["variants"].get(n, {})
            cells.append(_us(e) if "us" in e else ("error" if "error" in e else "–"))
        lines.append(f"| {n} | " + " | ".join(cells) + f" | {', '.join(f'{k} {v}' for k, v in (res_ or {}).items())} |")
    return lines + ["", "</details>", ""]


def roofline(results: dict[str, list[dict]], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 6), dpi=120)
    latest = {op: runs[0] for op, runs in results.items()}
    first = next(iter(latest.values()))
    bw = first["ceilings"]["copy_GBps"] * 1e9
    peak = first["ceilings"]["matmul_TFLOPs"]
    xs = [r["flops"] / r["bytes"] for res in latest.values() for r in res["rows"] if r.get("bytes") and r.get("flops")]
    lo, hi = min(xs + [0.1]) / 3, max(xs + [1000]) * 3
    grid = [lo * (hi / lo) ** (i / 200) for i in range(201)]
    ax.plot(grid, [min(x * bw / 1e12, peak) for x in grid], color="black", lw=1.5,
            label=f"measured: copy {bw / 1e9:.0f} GB/s, bf16 matmul {peak:.0f} TFLOP/s")
    colors = {op: f"C{i}" for i, op in enumerate(benchmarked_ops())}  # the default colour cycle, in report order
    for op, res in latest.items():
        final = res["rows"][0]["final"]
        for i, r in enumerate(res["rows"]):
            if not (r.get("bytes") and r.get("flops")):
                continue
            x = r["flops"] / r["bytes"]
            b, c = r["variants"].get("baseline", {}), r["variants"].get(final, {})
            if "us" not in b or "us" not in c:
                continue
            yb, yc = r["flops"] / (b["us"] * 1e-6) / 1e12, r["flops"] / (c["us"] * 1e-6) / 1e12
            ax.scatter([x], [yb], marker="o", facecolors="none", edgecolors=colors[op], s=36,
                       label=f"{op} baseline" if i == 0 else None)
            ax.scatter([x], [yc], marker="o", color=colors[op], s=36, label=f"{op} {final}" if i == 0 else None)
            if abs(yc / yb - 1) > 0.03:
                ax.annotate("", xy=(x, yc), xytext=(x, yb), arrowprops=dict(arrowstyle="->", color=colors[op], lw=0.8))
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity of the traffic model (FLOP / byte)")
    ax.set_ylabel("achieved TFLOP/s (model FLOPs / measured time)")
    ax.set_title(f"Roofline on {first['device']}: each op's baseline (hollow) and candidate (filled), one point per shape", fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp.png")
    fig.savefig(tmp)
    plt.close(fig)
    os.replace(tmp, out)


def gil_section(path: Path) -> list[str]:
    """Reference case 2 from `patterns serving prefill --format json` run on the GPU host."""
    try:
        checks = json.loads(path.read_text())
        rows = [(c["details"]["impl"], c["details"], c["passed"]) for c in checks]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ReportError(f"{path}: not the JSON of `patterns serving prefill --format json` ({e})") from None
    lines = ["## Prefill with KV-cache transfer, GIL (reference case 2)", "",
             "Reproduce: `patterns serving prefill --impl serving/prefill.py --impl REWRITTEN --device cuda --rounds 15 --format json` "
             "(REWRITTEN: a copy of serving/prefill.py after `patterns apply release_gil_native_wait COPY --write`; "
             f"on the GPU host's CPU cores). Raw data: `{path}`.", "",
             "| implementation | prefill alone ms | prefill + transfer ms | gap (median) | 95% interval | waits overlapping | limit | result |",
             "|---|---|---|---|---|---|---|---|"]
    for impl, d, ok in rows:
        lo, hi = d["gap_ci95"]
        lines.append(f"| `{impl}` | {d['alone_ms_median']:.1f} | {d['with_transfer_ms_median']:.1f} | {d['gap_median'] * 100:+.1f}% "
                     f"| [{lo * 100:+.1f}%, {hi * 100:+.1f}%] | {d['native_overlap_median'] * 100:.0f}% | {d['limit'] * 100:.0f}% "
                     f"| {'met' if ok else '**over the limit**'} |")
    return lines + [""]


def render(results: dict[str, list[dict]], plot: Path | None, out: Path, command: str = "python -m patterns.validation.benchmarks_report",
           gil: Path | None = None) -> str:
    lines = ["# Benchmarks", "",
             f"Generated by `{command}` from the JSON that "
             "`python -m patterns.benchmark` wrote on the GPU; do not edit by hand. Each case ran in a process "
             "of its own: the op's baseline, each step of its rewrite chain (the `patterns apply` calls shown, run on "
             "`kernels/<op>/baseline.py`) and upstream, checked against the op's reference on the timed inputs, then timed "
             "interleaved in CUDA graphs with the L2 flushed before every launch (validation/perf.py).", ""]
    if plot is not None:
        lines += [f"![roofline]({os.path.relpath(plot, out.parent)})", ""]
    lines += ["| case | target | result |", "|---|---|---|"]
    for op in benchmarked_ops():
        for t in (targets(op, results[op][0]) if op in results else []):
            lines.append(f"| {op} | {t['what']} | {'met' if t['met'] else '**missed**'}: {t['measured']} |")
    lines.append("")
    for op in benchmarked_ops():
        if op in results:
            lines += case_section(op, results[op])
    if gil is not None:
        lines += gil_section(gil)
    missing = [op for op in benchmarked_ops() if op not in results]
    if missing:
        lines += ["## Not measured", "", f"No GPU results for: {', '.join(missing)}.", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("inputs", nargs="+", type=Path, help="<op>.json files or folders holding them")
    parser.add_argument("--out", type=Path, default=Path("BENCHMARKS.md"))
    parser.add_argument("--plot", type=Path, default=Path("docs/benchmarks-roofline.png"), help="roofline PNG ('' for none)")
    parser.add_argument("--gil", type=Path, default=None, help="JSON of `patterns serving prefill --format json` from the GPU host")
    args = parser.parse_args(argv)
    try:
        results = load(args.inputs)
        if args.gil is not None:
            gil_section(args.gil)  # bad input fails here, before anything is written
    except ReportError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    plot = args.plot if str(args.plot) else None
    if plot is not None:
        roofline(results, plot)
    inputs = " ".join(str(p) for p in args.inputs)
    command = f"python -m patterns.validation.benchmarks_report {inputs} --out {args.out}" + (f" --plot {plot}" if plot else " --plot ''")
    command += f" --gil {args.gil}" if args.gil is not None else ""
    text = render(results, plot, args.out, command, gil=args.gil)
    write_atomic(args.out, text)
    print(f"wrote {args.out}" + (f" and {plot}" if plot else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
