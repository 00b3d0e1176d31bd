"""The end-to-end GPU run's evidence: register the agent's accepted versions, and render what came back.

    python -m patterns.serving.evidence register evidence/gpu/h200-agent/agent-home     # into PATTERNS_REGISTRY
    python -m patterns.serving.evidence render RESULTS/ --out evidence/gpu/h200-serving

`register` replays the agent's accepts (its review items, oldest decision
first) for the ops the engine runs: each accepted candidate becomes the next
version of its op and is made live, so the registry holds the same versions
and trail as the session that accepted them. A candidate whose bytes no longer
match the item's sha256 stops it. Paths the items recorded on the GPU machine
(`/tmp/agent/...`) are read from the agent home given.

`render` turns the folder `evidence/gpu/h200-serving/run.sh` wrote (compare.json,
the best shape's traces, the logs) into README.md beside copies of those files:
tokens/s and ITL per shape, TTFT, the per-op time shares, and at the best shape
the op breakdown beside the kernels' own benchmark ratios (BENCHMARKS.md's
data, evidence/gpu/h200-<op>/<op>.json) and the gate's ratio for each accepted
step.
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

from patterns.core.files import sha256_file, write_atomic
from patterns.core.records import ReviewItem, ServingComparison
from patterns.serving import report
from patterns.serving.model import OPS

GPU_PREFIX = "/tmp/agent/"  # where evidence/gpu/h200-agent/run.sh kept the agent home on the GPU machine
EVIDENCE = Path(__file__).resolve().parents[1] / "evidence" / "gpu"
COPIED = ("compare.json", "gpu.txt", "status.txt", "run.log")
BENCHMARK_KEYS = {"kda_decode": ("B",), "decode_attention": ("B", "S"), "matmul": ("M", "N", "K")}  # what names a benchmark row


class EvidenceError(ValueError):
    """A results folder or agent home that cannot be read: one line, exit 2."""


def _local(path: str, home: Path) -> Path:
    return home / path[len(GPU_PREFIX):] if path.startswith(GPU_PREFIX) else Path(path)


def accepted_items(home: Path) -> list[ReviewItem]:
    """The accepted review items of the engine's ops, oldest decision first."""
    items = [ReviewItem.model_validate_json(p.read_bytes()) for p in sorted((home / "reviews").glob("*.json")) if not p.name.endswith(".accept.json")]
    return sorted((i for i in items if i.status == "accepted" and i.op in OPS), key=lambda i: (i.decided_at, i.id))


def register(home: Path, registry) -> list[tuple[ReviewItem, int]]:
    """Each accepted candidate as the next live version of its op (see the module doc); (item, version) pairs."""
    done = []
    for item in accepted_items(home):
        candidate, bundle = _local(item.candidate, home), _local(item.bundle, home)
        if not candidate.is_file() or sha256_file(candidate) != item.candidate_sha256:
            raise EvidenceError(f"{candidate}: missing, or not the candidate review item {item.id} accepted")
        v = registry.register(item.op, candidate, symbol=item.symbol, pattern=item.pattern_id, bundle=bundle if bundle.is_file() else None,
                              accepted_by=item.decided_by or "maintainer")
        registry.promote(item.op, v.version)
        done.append((item, v.version))
    return done


# ---------------------------------------------------------------------- render
def _table(rows: report.Rows) -> str:
    head, body = rows
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in body])


def kernel_benchmarks(batch: int, evidence: Path = EVIDENCE) -> dict[str, str]:
    """The final rewrite chain's ratio over the baseline in BENCHMARKS.md's data, at the engine's batch where it was measured."""
    out = {}
    for op in ("kda_decode", "decode_attention", "matmul"):
        path = evidence / f"h200-{op}" / f"{op}.json"
        if not path.is_file():
            continue
        rows = json.loads(path.read_text())["rows"]
        if op == "decode_attention":
            rows = [r for r in rows if r["shape"].get("PAGE") == 16]  # the engine's cache is paged, 16 a page
        if "B" in rows[0]["shape"]:
            rows = [min(rows, key=lambda r: abs(r["shape"]["B"] - batch))]
        parts = []
        for r in rows:
            ratio = r["ratios"][f"{r['final']} vs baseline"]["median"]
            shape = ", ".join(f"{k}={r['shape'][k]}" for k in BENCHMARK_KEYS[op])
            parts.append(f"{ratio:.2f}x ({shape})")
        out[op] = "; ".join(parts)
    return out


def gate_chain(home: Path) -> dict[str, list[str]]:
    """Per op, each accepted step: its pattern and the gate's geometric-mean ratio over the version it was built on."""
    from patterns.core.records import EvidenceBundle

    chain: dict[str, list[str]] = {}
    for item in accepted_items(home):
        bundle = _local(item.bundle, home)
        ratio = ""
        if bundle.is_file():
            b = EvidenceBundle.model_validate_json(bundle.read_bytes())
            overall = next((c for c in b.checks if c.name == "speed overall" and c.passed is not None), None)
            ratio = f" {overall.details['geomean_ratio']:.2f}x" if overall else ""
        chain.setdefault(item.op, []).append(f"{item.pattern_id}{ratio}")
    return chain


def share_rows(result: ServingComparison) -> report.Rows:
    """Per shape, each op's share of the step: baseline -> candidate."""
    names = [*OPS, "glue", "idle"]
    rows = []
    for s in sorted(result.shapes, key=lambda s: (s.context, s.batch)):
        p = {pr.arm: {o.op: o.share for o in pr.ops} for pr in s.profiles}
        if result.baseline in p and result.candidate in p:
            rows.append([str(s.batch), str(s.context)] + [f"{100 * p[result.baseline][n]:.0f}% → {100 * p[result.candidate][n]:.0f}%" for n in names])
    return ["batch", "context", *names], rows


def _profile_note(result: ServingComparison) -> str:
    profiles = [p for s in result.shapes for p in s.profiles]
    if not profiles:
        return "No step was profiled."
    n, device = profiles[0].steps, profiles[0].source == "device"
    how = (f"device kernel times from a torch.profiler trace of {n} {'graph replays' if all(p.replayed for p in profiles) else 'eager steps'} per arm "
           "(kernels assigned to ops by name)" if device else f"host profiler ranges around each op call over {n} eager steps per arm")
    return f"Each op's time: {how}; glue: the PyTorch work between ops; idle: the rest of the timed step."


def render(result: ServingComparison, home: Path, files: list[str], evidence: Path = EVIDENCE) -> str:
    env = result.environment
    m = result.model
    versions = {arm: {op.op: f"v{op.version}" + (f" {op.pattern}" if op.pattern else "") for op in ops} for arm, ops in result.arms.items()}
    chain = gate_chain(home)
    lines = [
        f"# End to end on one H200: {result.baseline} against the live accepted versions",
        "",
        "Issue #19. `bash evidence/gpu/h200-serving/run.sh` on the GPU machine (the command is in the script's header), rendered "
        "with `python -m patterns.serving.evidence render DIR --out evidence/gpu/h200-serving`. Do not edit by hand.",
        "",
        f"{env.get('gpu', result.device)}, torch {env.get('torch')}, Triton {env.get('triton')}, CUDA {env.get('cuda')}; decode steps "
        f"{'replayed from CUDA graphs' if result.mode == 'graph' else 'launched eagerly'}, both arms interleaved in one process "
        f"(rounds alternate AB / BA; ratios are medians of per-round ratios with bootstrap 95% intervals).",
        "",
        f"Model (preset {result.preset or 'none'} of serving/model.py): {len(m.get('layers', []))} layers, KDA and attention "
        f"{m.get('layers', []).count('kda')}:{m.get('layers', []).count('attn')}, hidden {m.get('hidden')}, KDA {m.get('kda_heads')} heads of "
        f"{m.get('kda_key_dim')}x{m.get('kda_value_dim')}, attention {m.get('attn_heads')}/{m.get('attn_kv_heads')} heads of {m.get('attn_head_dim')} "
        f"over pages of {m.get('page')}, MLP {m.get('mlp_hidden')}, vocabulary {m.get('vocab')}, {m.get('dtype')}, random weights. "
        "The batch at each shape is copies of one prefilled request, each in pages of its own.",
        "",
        "## What ran",
        "",
        _table((["op", result.baseline, result.candidate, "accepted steps (gate's ratio over the step before)"],
                [[op, versions[result.baseline].get(op, ""), versions[result.candidate].get(op, ""), " → ".join(chain.get(op, [])) or "-"] for op in OPS])),
        "",
        "## Decode: output tokens/s",
        "",
        _table(report.throughput_rows(result)),
        "",
        *[f"- batch {s.batch}, context {s.context}: {s.note}" for s in result.shapes if s.note],
        "",
        "## Inter-token latency",
        "",
        _table(report.latency_rows(result)),
        "",
        "## Time to first token (one request: its prefill and first token)",
        "",
        _table(report.ttft_rows(result)),
        "",
        f"## Share of a decode step per op, {result.baseline} → {result.candidate}",
        "",
        _profile_note(result),
        "",
        _table(share_rows(result)),
    ]
    best = result.best()
    if best is not None:
        lines += [
            "",
            f"## The best shape: batch {best.batch}, context {best.context}, {best.ratio:.3f}x [{best.ci95[0]:.3f}, {best.ci95[1]:.3f}]",
            "",
            "ms per step; `*` an op whose version differs; ratio: the op's time per step in the engine, "
            f"{result.baseline} over {result.candidate}; kernel benchmark: BENCHMARKS.md's final chain over the baseline, at the nearest batch.",
            "",
            _table(report.breakdown_rows(result, best, kernel_benchmarks(best.batch, evidence))),
            "",
            report.explain(result, best),
        ]
    lines += ["", "## Checks", ""]
    verify = result.checks.get("verify", {})
    if "ops" in verify:
        lines += [f"`--verify` (eager, every live call shadowed by its reference; batch {verify['batch']}, prompt {verify['prompt_len']}, "
                  f"{verify['new_tokens']} tokens): {'every op within its tolerance' if verify['passed'] else 'FAILED'}.", "",
                  _table((["op", "version", "calls", "max abs err", "in tolerance"],
                          [[o["op"], f"v{o['version']}", str(o["calls"]), f"{o['max_abs_err']:.2e}" if o["max_abs_err"] is not None else "-",
                            str(o["within_tolerance"])] for o in verify["ops"]])), ""]
    elif verify:
        lines += [f"`--verify`: {verify.get('error', 'not run')}", ""]
    gve = result.checks.get("graph_vs_eager", {})
    if "same_tokens" in gve:
        lines += [f"Graph path against the eager path (live ops, batch {gve['batch']}, prompt {gve['prompt_len']}, {gve['new_tokens']} tokens): "
                  f"{'the same tokens' if gve['same_tokens'] else 'DIFFERENT tokens'}; eager {gve['eager']['tokens_per_s']:.1f} tokens/s "
                  f"(ITL p50 {gve['eager']['itl_ms_p50']:.2f} ms), {'CUDA graph' if result.device.startswith('cuda') else 'graph path (no capture on a CPU)'} "
                  f"{gve['graph']['tokens_per_s']:.1f} tokens/s "
                  f"(ITL p50 {gve['graph']['itl_ms_p50']:.2f} ms).", ""]
    elif gve:
        lines += [f"Graph path against the eager path: {gve.get('error', 'not run')}", ""]
    lines += ["## Files", ""] + [f"- `{f}`" for f in files] + [""]
    return "\n".join(lines)


def render_folder(results: Path, out: Path, home: Path) -> Path:
    path = results / "compare.json"
    if not path.is_file():
        raise EvidenceError(f"{path}: no compare.json (the output of evidence/gpu/h200-serving/run.sh)")
    try:
        result = ServingComparison.model_validate_json(path.read_bytes())
    except ValueError as exc:
        raise EvidenceError(f"{path}: not a comparison: {str(exc).splitlines()[0]}") from None
    out.mkdir(parents=True, exist_ok=True)
    traces = sorted(p.trace for s in result.shapes for p in s.profiles if p.trace)
    files = [f for f in (*COPIED, *traces) if (results / f).is_file()]
    for f in files:
        if (results / f).resolve() != (out / f).resolve():
            shutil.copyfile(results / f, out / f)
    readme = out / "README.md"
    write_atomic(readme, render(result, home, files))
    return readme


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m patterns.serving.evidence", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="verb", required=True)
    reg = sub.add_parser("register", help="the agent's accepted versions into the registry (PATTERNS_REGISTRY)")
    reg.add_argument("home", type=Path, help="the agent home (evidence/gpu/h200-agent/agent-home)")
    ren = sub.add_parser("render", help="README.md and copies of the run's files")
    ren.add_argument("results", type=Path, help="the folder run.sh wrote ($OUT)")
    ren.add_argument("--out", type=Path, default=EVIDENCE / "h200-serving")
    ren.add_argument("--agent-home", type=Path, default=EVIDENCE / "h200-agent" / "agent-home")
    args = parser.parse_args(argv)
    try:
        if args.verb == "register":
            from patterns.serving.registry import Registry

            for item, version in register(args.home, Registry()):
                print(f"{item.op} v{version}: {item.pattern_id} ({item.id}, accepted by {item.decided_by})")
        else:
            print(render_folder(args.results, args.out, args.agent_home))
    except (EvidenceError, OSError, ValueError) as exc:
        print(f"error: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
