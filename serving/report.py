"""Tables of an end-to-end comparison (patterns.core.records.ServingComparison), as rows.

The same rows feed the terminal (serving/cli.py, rich) and the committed
evidence (serving/evidence.py, Markdown), so the two never disagree.
"""
from __future__ import annotations

from patterns.core.records import ServingComparison, ShapeComparison, StepProfile
from patterns.serving.profile import GLUE, IDLE

Rows = tuple[list[str], list[list[str]]]


def ci(lo_hi: list[float]) -> str:
    return f"[{lo_hi[0]:.3f}, {lo_hi[1]:.3f}]" if lo_hi else "-"


def _measured(result: ServingComparison) -> list[ShapeComparison]:
    return sorted(result.shapes, key=lambda s: (s.context, s.batch))


def throughput_rows(result: ServingComparison) -> Rows:
    """Per shape: each arm's output tokens/s and the ratio with its interval."""
    a, b = result.baseline, result.candidate
    head = ["batch", "context", f"{a} tok/s", f"{b} tok/s", "ratio", "95% CI"]
    rows = []
    for s in _measured(result):
        if s.error:
            rows.append([str(s.batch), str(s.context), "-", "-", "-", s.error])
        else:
            rows.append([str(s.batch), str(s.context), f"{s.arms[a].tokens_per_s:.1f}", f"{s.arms[b].tokens_per_s:.1f}", f"{s.ratio:.3f}", ci(s.ci95)])
    return head, rows


def latency_rows(result: ServingComparison) -> Rows:
    """Per shape: each arm's inter-token latency, p50 and p99."""
    a, b = result.baseline, result.candidate
    head = ["batch", "context", f"{a} ITL p50 ms", "p99", f"{b} ITL p50 ms", "p99"]
    rows = []
    for s in _measured(result):
        if not s.error:
            ma, mb = s.arms[a], s.arms[b]
            rows.append([str(s.batch), str(s.context), f"{ma.itl_ms_p50:.2f}", f"{ma.itl_ms_p99:.2f}", f"{mb.itl_ms_p50:.2f}", f"{mb.itl_ms_p99:.2f}"])
    return head, rows


def ttft_rows(result: ServingComparison) -> Rows:
    a, b = result.baseline, result.candidate
    head = ["context", f"{a} TTFT ms", f"{b} TTFT ms", "ratio", "95% CI"]
    rows = []
    for t in sorted(result.ttft, key=lambda t: t.context):
        med = {arm: sorted(v)[len(v) // 2] for arm, v in t.arms.items()}
        rows.append([str(t.context), f"{med[a]:.1f}", f"{med[b]:.1f}", f"{t.ratio:.3f}", ci(t.ci95)])
    return head, rows


def _profile(shape: ShapeComparison, arm: str) -> StepProfile | None:
    return next((p for p in shape.profiles if p.arm == arm), None)


def changed_ops(result: ServingComparison) -> list[str]:
    """Ops whose version differs between the arms."""
    a = {op.op: op.sha256 for op in result.arms[result.baseline]}
    return [op.op for op in result.arms[result.candidate] if a.get(op.op) != op.sha256]


def breakdown_rows(result: ServingComparison, shape: ShapeComparison, kernel_ratios: dict[str, str] | None = None) -> Rows:
    """Per op at one shape: each arm's time per step and share, the in-engine ratio, and (given) the kernel benchmark's.

    An op whose version differs between the arms is marked `*`.
    """
    a, b = result.baseline, result.candidate
    pa, pb = _profile(shape, a), _profile(shape, b)
    head = ["op", f"{a} ms", "share", f"{b} ms", "share", "ratio"] + (["kernel benchmark"] if kernel_ratios is not None else [])
    if pa is None or pb is None:
        return head, []
    changed = set(changed_ops(result))
    rows = []
    for sa, sb in zip(pa.ops, pb.ops):
        ratio = f"{sa.ms_per_step / sb.ms_per_step:.2f}" if sb.ms_per_step > 0 and sa.op not in (GLUE, IDLE) else "-"
        row = [sa.op + (" *" if sa.op in changed else ""), f"{sa.ms_per_step:.3f}", f"{100 * sa.share:.1f}%", f"{sb.ms_per_step:.3f}", f"{100 * sb.share:.1f}%", ratio]
        rows.append(row + ([kernel_ratios.get(sa.op, "") if sa.op in changed else ""] if kernel_ratios is not None else []))
    rows.append(["step", f"{pa.step_ms:.3f}", "100%", f"{pb.step_ms:.3f}", "100%", f"{pa.step_ms / pb.step_ms:.2f}"] + ([""] if kernel_ratios is not None else []))
    return head, rows


def ceiling(result: ServingComparison, shape: ShapeComparison) -> float | None:
    """Amdahl's bound at this shape: the ratio if the changed ops took no time at all and nothing else moved."""
    pa = _profile(shape, result.baseline)
    if pa is None:
        return None
    changed = set(changed_ops(result))
    rest = pa.step_ms - sum(s.ms_per_step for s in pa.ops if s.op in changed)
    return pa.step_ms / rest if rest > 0 else None


def explain(result: ServingComparison, shape: ShapeComparison) -> str:
    """One paragraph: where the baseline's step time went, what the changed ops gave back, and the bound."""
    pa, pb = _profile(shape, result.baseline), _profile(shape, result.candidate)
    if pa is None or pb is None:
        return ""
    changed = set(changed_ops(result))
    gained = {sa.op: sa.ms_per_step - sb.ms_per_step for sa, sb in zip(pa.ops, pb.ops)}
    moved = sum(v for op, v in gained.items() if op in changed)
    others = sum(v for op, v in gained.items() if op not in changed)
    held = sorted(((sb.share, sb.op) for sb in pb.ops), reverse=True)[:2]
    bound = ceiling(result, shape)
    text = (f"At batch {shape.batch}, context {shape.context}: the {result.baseline} step takes {pa.step_ms:.3f} ms, the "
            f"{result.candidate} step {pb.step_ms:.3f} ms ({shape.ratio:.3f}x tokens/s). The changed ops ({', '.join(sorted(changed)) or 'none'}) "
            f"give back {moved:.3f} ms a step; everything else moves by {others:+.3f} ms. ")
    text += f"The {result.candidate} step is held by {held[0][1]} ({100 * held[0][0]:.0f}%) and {held[1][1]} ({100 * held[1][0]:.0f}%)"
    if bound is not None:
        text += f"; even changed ops that took no time would give at most {bound:.2f}x here"
    return text + "."
