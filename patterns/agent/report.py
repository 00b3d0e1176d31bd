"""What the agent reached on each target, from its runs: the chain, the gate's checks, the speed ratios.

    python -m patterns.agent.report AGENT_HOME --target NAME[=LABEL] ... --out DIR

reads the newest run of each target (`AGENT_HOME/runs/<NAME>-<time>/journal.jsonl`,
NAME the spec's name) and the evidence bundle of every attempt, and writes
`report.json` and `report.md` to DIR. Per target:

- the chain: every attempt (pattern, parameters, what it was built on, outcome,
  the layer and reason of the first failing check, the action the feedback chose);
- the gate's checks of each validated candidate, counted per layer;
- the speed ratio against the target as it was (the unmodified upstream kernel:
  the agent validates every candidate against its target), per GPU shape with
  the gate's bootstrap 95% interval (both implementations interleaved in one
  process, CUDA graphs, L2 flushed before every launch: validation/perf.py),
  and the geometric mean over the shapes;
- the verdict: the best candidate that passed the gate when its geometric-mean
  interval lies above 1; otherwise "nothing helps", with the layer the feedback
  pointed at (where most attempts stopped; the last one on a tie) and its reason.

A baseline bundle given with `--baseline NAME=BUNDLE.json` (the unmodified kernel
validated against itself) adds its checks and its self-ratio: the noise floor.
"""
from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path
from typing import Any

from patterns.core import files


def _bundle(path: str, run_dir: Path | None = None) -> dict[str, Any] | None:
    """The bundle at `path`; with `run_dir`, a path recorded in another place (the agent home of the GPU
    machine, unpacked here) is read from the same place under this run's folder."""
    if not path:
        return None
    where = Path(path)
    if run_dir is not None and not where.is_file() and run_dir.name in where.parts:
        where = run_dir.joinpath(*where.parts[len(where.parts) - where.parts[::-1].index(run_dir.name):])
    try:
        return json.loads(where.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _passed(bundle: dict[str, Any]) -> bool:
    """The gate's verdict: no check failed (a check not run, speed on a CPU, fails nothing)."""
    return not any(c.get("passed") is False for c in bundle.get("checks", []))


def checks_summary(bundle: dict[str, Any]) -> dict[str, Any]:
    """Per layer: checks passed, failed, not run; and the first failure's reason."""
    layers: dict[str, Counter] = {}
    first = ""
    for c in bundle.get("checks", []):
        state = "passed" if c.get("passed") is True else "failed" if c.get("passed") is False else "not run"
        layers.setdefault(c["layer"], Counter())[state] += 1
        if state == "failed" and not first:
            first = c.get("reason", "")
    return {"layers": {k: dict(v) for k, v in layers.items()}, "first_failure": first}


def speed(bundle: dict[str, Any]) -> dict[str, Any] | None:
    """The gate's per-shape ratios (baseline time / candidate time, > 1 faster) and their geometric mean."""
    shapes = [{"shape": c.get("shape", {}), "ratio": c["details"]["ratio"], "ci95": c["details"]["ci95"],
               "baseline_us": c["details"].get("baseline_us"), "candidate_us": c["details"].get("candidate_us"),
               "rounds": c["details"].get("rounds")}
              for c in bundle.get("checks", []) if c.get("name") == "speed" and "ratio" in c.get("details", {})]
    overall = next((c for c in bundle.get("checks", []) if c.get("name") == "speed overall" and "geomean_ratio" in c.get("details", {})), None)
    if not shapes:
        return None
    out: dict[str, Any] = {"shapes": shapes}
    if overall is not None:
        out.update(geomean=overall["details"]["geomean_ratio"], ci95=overall["details"]["ci95"], passed=overall.get("passed"))
    return out


def newest_run(home: Path, name: str) -> Path | None:
    runs = sorted((home / "runs").glob(f"{name}-*/journal.jsonl"))
    return runs[-1] if runs else None


def target_report(home: Path, name: str, label: str = "", baseline: str = "") -> dict[str, Any]:
    from patterns.agent.journal import Journal

    journal_path = newest_run(home, name)
    report: dict[str, Any] = {"name": name, "label": label}
    if baseline:
        b = _bundle(baseline)
        report["baseline"] = {"bundle": baseline, "passed": _passed(b) if b else None,
                              **({"checks": checks_summary(b), "self_speed": speed(b)} if b else {"error": "unreadable"})}
    if journal_path is None:
        report["verdict"] = {"kind": "no run", "text": f"no run of {name} in {home / 'runs'}"}
        return report
    journal = Journal(journal_path)
    start = journal.last("start")
    plan = journal.last("plan")
    finish = journal.last("finish")
    report.update(run=journal_path.parent.name, target=start.data.get("target") if start else "",
                  device=start.data.get("device") if start else "", finish=finish.data.get("reason") if finish else "(unfinished)")
    if plan is not None:
        report["bottlenecks"] = [{"shape": a["shape"], "kernel": a["kernel"], "class": a["bottleneck"].get("cls")} for a in plan.data.get("analysis", [])]
        report["planned"] = [p["pattern_id"] for p in plan.data.get("planned", [])]
        report["by_hand"] = plan.data.get("by_hand", [])
    chain = []
    for e in journal.of("attempt"):
        a = e.data
        row = {k: a.get(k) for k in ("step", "pattern_id", "params", "base", "outcome", "layer", "reason", "action")}
        b = _bundle(a.get("bundle", ""), journal_path.parent)
        if b is not None:
            row["checks"] = checks_summary(b)
            row["speed"] = speed(b)
            row["bundle"] = a["bundle"]
        chain.append(row)
    report["chain"] = chain
    report["verdict"] = verdict(chain)
    return report


def verdict(chain: list[dict[str, Any]]) -> dict[str, Any]:
    passed = [r for r in chain if r["outcome"] == "passed" and (r.get("speed") or {}).get("geomean") is not None]
    best = max(passed, key=lambda r: r["speed"]["geomean"], default=None)
    if best is not None and best["speed"]["ci95"][0] > 1.0:
        s = best["speed"]
        return {"kind": "faster", "step": best["step"], "pattern_id": best["pattern_id"], "geomean": s["geomean"], "ci95": s["ci95"],
                "text": f"{best['pattern_id']} (step {best['step']}): {s['geomean']:.3f}x [{s['ci95'][0]:.3f}, {s['ci95'][1]:.3f}] vs upstream"}
    untimed = [r for r in chain if r["outcome"] == "passed" and not (r.get("speed") or {}).get("geomean")]
    if best is None and untimed:
        ids = ", ".join(f"{r['pattern_id']} (step {r['step']})" for r in untimed)
        return {"kind": "not timed", "text": f"passed the gate without a speed measurement (no GPU): {ids}"}
    stopped = [r for r in chain if r["outcome"] != "passed"]
    layers = Counter(r["layer"] or r["outcome"] for r in stopped)
    if best is not None:
        layer, reason = "performance", f"best passing candidate {best['pattern_id']}: {best['speed']['geomean']:.3f}x " \
            f"[{best['speed']['ci95'][0]:.3f}, {best['speed']['ci95'][1]:.3f}], not measurably faster"
    elif layers:
        top = max(layers.values())
        layer = next(r["layer"] or r["outcome"] for r in reversed(stopped) if layers[r["layer"] or r["outcome"]] == top)
        reason = next(r["reason"] for r in reversed(stopped) if (r["layer"] or r["outcome"]) == layer)
    else:
        layer, reason = "plan", "no automatic rewrite applied to this kernel"
    return {"kind": "nothing helps", "layer": layer, "reason": reason, "stopped_at": dict(layers),
            "text": f"nothing helps: the feedback pointed at {layer} ({reason})"}


def _shape(s: dict[str, Any]) -> str:
    return ",".join(f"{k}={v}" for k, v in s.items())


def markdown(reports: list[dict[str, Any]]) -> str:
    out = ["# The agent on upstream kernels", ""]
    out += ["| target | upstream | verdict |", "| --- | --- | --- |"]
    out += [f"| {r['name']} | {r.get('label', '')} | {r['verdict']['text']} |" for r in reports]
    for r in reports:
        out += ["", f"## {r['name']}", "", f"{r.get('label', '')}", "", f"run `{r.get('run', '-')}` on {r.get('device', '-')}; {r.get('finish', '')}", ""]
        if "baseline" in r:
            b = r["baseline"]
            noise = (b.get("self_speed") or {}).get("geomean")
            out.append(f"the unmodified kernel against itself: gate {'passed' if b.get('passed') else 'FAILED'}"
                       + (f", self-ratio {noise:.3f}" if noise else "") + (f"; first failure: {b['checks']['first_failure']}" if b.get("checks", {}).get("first_failure") else ""))
            out.append("")
        if r.get("bottlenecks"):
            classes = Counter(b["class"] for b in r["bottlenecks"])
            out.append("bottleneck (the retriever's estimate over the GPU shapes): " + ", ".join(f"{k} x{v}" for k, v in classes.items()))
            out.append("")
        out += ["| # | pattern | outcome | layer: reason | next | geomean vs upstream |", "| --- | --- | --- | --- | --- | --- |"]
        for a in r.get("chain", []):
            s = a.get("speed") or {}
            geo = f"{s['geomean']:.3f} [{s['ci95'][0]:.3f}, {s['ci95'][1]:.3f}]" if s.get("geomean") is not None else "-"
            params = ", ".join(f"{k}={v}" for k, v in (a.get("params") or {}).items())
            reason = (f"{a['layer']}: " if a.get("layer") else "") + (a.get("reason") or "").replace("|", "/")
            out.append(f"| {a['step']} | {a['pattern_id']}" + (f" ({params})" if params else "") + f" | {a['outcome']} | {reason} | {a.get('action', '')} | {geo} |")
        shaped = [a for a in r.get("chain", []) if (a.get("speed") or {}).get("shapes")]
        if shaped:
            out += ["", "per shape (baseline us -> candidate us, ratio [95% CI]):", ""]
            for a in shaped:
                parts = [f"{_shape(x['shape'])}: {x['baseline_us']:.1f} -> {x['candidate_us']:.1f} us, {x['ratio']:.3f} [{x['ci95'][0]:.3f}, {x['ci95'][1]:.3f}]"
                         for x in a["speed"]["shapes"]]
                out.append(f"- step {a['step']} {a['pattern_id']}: " + "; ".join(parts))
        out += ["", f"**{r['verdict']['text']}**"]
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m patterns.agent.report", description=__doc__.splitlines()[0])
    ap.add_argument("home", type=Path, help="the agent home (PATTERNS_AGENT_HOME) holding runs/")
    ap.add_argument("--target", action="append", default=[], help="a spec name, NAME or NAME=LABEL (repeat)")
    ap.add_argument("--baseline", action="append", default=[], help="NAME=BUNDLE.json: the unmodified kernel validated against itself")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    baselines = dict(b.split("=", 1) for b in args.baseline)
    reports = []
    for t in args.target:
        name, _, label = t.partition("=")
        reports.append(target_report(args.home, name, label, baselines.get(name, "")))
    args.out.mkdir(parents=True, exist_ok=True)
    files.write_atomic(args.out / "report.json", (json.dumps(reports, indent=2) + "\n").encode())
    text = markdown(reports)
    files.write_atomic(args.out / "report.md", text.encode())
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
