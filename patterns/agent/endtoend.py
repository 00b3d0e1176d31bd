"""The agent judged end to end: after an accept, the engine's tokens/s with the op's previous and new versions.

    path = run_comparison(item, registry, out)     # a child process: patterns serving compare --against OP=PREVIOUS
    e2e = judge(item, read_bundle(item.bundle), ServingComparison.model_validate_json(path.read_bytes()), path)
    store.record_end_to_end(item.id, e2e)          # the review item carries it; e2e.flag says when the win did not show

The gate's kernel ratio says why a candidate should help; the end-to-end
ratio says whether it did, at the shapes a server runs. The comparison runs
in a child process with a time limit (the accepted code is still code the
agent made), on the registry the accept just changed: every op live, the
accepted op at its previous version in the baseline arm, interleaved in one
process (patterns.serving.compare). Its shapes default to the h200 preset at
batch 1 and 32 with 32k-token contexts, where decode kernels hold the step.

The rule, in `judge`: at the best measured shape, the end-to-end ratio
*shows* when its 95% interval lies above 1 + E2E_FLOOR, is *slower* when it
lies below 1 - E2E_FLOOR, and is *within noise* otherwise. A kernel win (the
gate's geometric mean above 1 + the gate's noise floor) that does not show,
and any slower engine, is flagged, with the op's share of the step and its
in-engine ratio, which say why: a 1.25x kernel that is 2% of the step can
give at most 0.4%.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from patterns.core.records import EndToEnd, EvidenceBundle, ReviewItem, ServingComparison
from patterns.core.stats import NOISE_FLOOR as KERNEL_FLOOR  # the gate's: a kernel ratio within it is no win

E2E_FLOOR = 0.01
MODEL, BATCHES, CONTEXTS = "h200", (1, 32), (32768,)
TIMEOUT_S = 900


class EndToEndError(ValueError):
    """The end-to-end comparison could not be made or read: one line (the accept itself stands)."""


def kernel_ratio(bundle: EvidenceBundle) -> float | None:
    """The gate's geometric-mean speed ratio; None for a bundle without timings (a CPU run)."""
    overall = next((c for c in bundle.checks if c.name == "speed overall" and c.passed is not None), None)
    return float(overall.details["geomean_ratio"]) if overall is not None else None


def previous_version(registry, item: ReviewItem) -> int:
    """The version that was live before the item's (the registry's trail)."""
    trail = registry.trail(item.op)
    if item.registry_version is None or len(trail) < 2 or trail[-1] != item.registry_version:
        raise EndToEndError(f"{item.op}: v{item.registry_version} is not the live version that followed another (trail {trail})")
    return trail[-2]


def run_comparison(item: ReviewItem, registry, out: Path, *, model: str = MODEL, batches=BATCHES, contexts=CONTEXTS,
                   timeout_s: float = TIMEOUT_S) -> Path:
    """`patterns serving compare --against OP=PREVIOUS` in a child process on the GPU; the comparison JSON."""
    previous = previous_version(registry, item)
    out.parent.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "patterns.cli", "serving", "compare", "--against", f"{item.op}={previous}", "--model", model,
           "--batch", ",".join(map(str, batches)), "--context", ",".join(map(str, contexts)), "--device", "cuda",
           "--trace", str(out.parent / "traces"), "--out", str(out), "--format", "json"]
    env = {**os.environ, "PATTERNS_REGISTRY": str(registry.root)}
    try:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise EndToEndError(f"end to end: patterns serving compare did not finish within {timeout_s:.0f} s") from None
    if proc.returncode != 0 or not out.is_file():
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise EndToEndError(f"end to end: patterns serving compare exited {proc.returncode}: {last}")
    return out


def judge(item: ReviewItem, bundle: EvidenceBundle, comparison: ServingComparison, source: Path) -> EndToEnd:
    """The end-to-end fields of the review item (the rule is the module doc's)."""
    if not comparison.device.startswith("cuda"):
        raise EndToEndError(f"{source}: a comparison on {comparison.device} measures no speed")
    best = comparison.best()
    if best is None:
        raise EndToEndError(f"{source}: no shape was measured ({'; '.join(s.error for s in comparison.shapes) or 'none asked'})")
    versions = {arm: next((op.version for op in ops if op.op == item.op), None) for arm, ops in comparison.arms.items()}
    previous, new = versions[comparison.baseline], versions[comparison.candidate]
    if new != item.registry_version or previous is None:
        raise EndToEndError(f"{source}: compares {item.op} v{previous} with v{new}, not the accepted v{item.registry_version}")
    share = op_ratio = None
    profiles = {p.arm: {o.op: o for o in p.ops} for p in best.profiles}
    if comparison.baseline in profiles and comparison.candidate in profiles:
        was, now = profiles[comparison.baseline][item.op], profiles[comparison.candidate][item.op]
        share = was.share
        op_ratio = was.ms_per_step / now.ms_per_step if now.ms_per_step > 0 else None
    lo, hi = best.ci95
    verdict = "shows" if lo > 1 + E2E_FLOOR else "slower" if hi < 1 - E2E_FLOOR else "within-noise"
    kernel = kernel_ratio(bundle)
    flag = ""
    if verdict == "slower" or (kernel is not None and kernel > 1 + KERNEL_FLOOR and verdict != "shows"):
        flag = (f"kernel {kernel:.3g}x, " if kernel is not None else "") + f"end to end {best.ratio:.3f}x [{lo:.3f}, {hi:.3f}] at batch {best.batch}, context {best.context}"
        if share is not None:
            flag += f": {item.op} is {100 * share:.1f}% of the step" + (f" and ran {op_ratio:.2f}x in the engine" if op_ratio else "")
    return EndToEnd(
        op=item.op, previous_version=previous, new_version=new, hardware=str(comparison.environment.get("gpu", comparison.device)),
        kernel_ratio=kernel, ratio=best.ratio, ci95=[lo, hi], shape={"batch": best.batch, "context": best.context},
        op_share=share, op_ratio=op_ratio, verdict=verdict, flag=flag, source=str(source),
    )
