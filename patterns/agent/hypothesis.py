"""The one place a hypothesis is worded: why a pattern should help, and what the gate should then show.

The numbers come from the retriever's analysis of the op at one of its
declared shapes (`Suggestion.expected_effect` is already written from them:
"grid of 32 programs fills 24% of 132 SMs ..."), the prediction from what the
pattern changes: an exact rewrite must stay bit-identical, a numerics-changing
one must keep the error within the op's tolerance (and, for a numerics
pattern, reduce the partitioned error), and speed is only ever predicted for
a GPU.
"""
from __future__ import annotations

from patterns.core.records import Bottleneck, Hypothesis, Suggestion
from patterns.core.schema import BottleneckClass, Category, Pattern, Safety


def prediction(pattern: Pattern, min_speedup: float) -> str:
    parts = []
    if pattern.safety == Safety.exact:
        parts.append("outputs bit-identical to the baseline on every shape")
    else:
        parts.append("outputs within the op's tolerance of the reference on every shape")
    if pattern.category == Category.numerics or BottleneckClass.numerics in pattern.applies_when.bottlenecks:
        parts.append("partitioned-vs-unpartitioned error no larger than the baseline's (visible on a GPU: the interpreter does not emulate TF32)")
    parts.append(f"on a GPU, a geometric-mean speed ratio of at least {min_speedup:g}x over the op's GPU shapes")
    return "; ".join(parts)


def hypothesize(pattern: Pattern, seen: list[tuple[str, dict[str, int], Suggestion, list[Bottleneck]]], grid_size: int, min_speedup: float) -> Hypothesis:
    """Word the hypothesis at one shape of the op's grid, stating where else the pattern fits.

    `seen`: (shape label, shape, the pattern's suggestion there, the kernel's bottlenecks there, primary
    first), in grid order; `grid_size`: the number of shapes analysed. The shape chosen is the first where the kernel shows the bottleneck the pattern
    lists first (split-KV: occupancy, at B=1), else the one where the pattern ranked highest.
    """
    first = pattern.applies_when.bottlenecks[0]
    showing = [x for x in seen if any(b.cls == first for b in x[3])]
    label, shape, s, bottlenecks = showing[0] if showing else max(seen, key=lambda x: x[2].score)
    effect = s.expected_effect or "; ".join(bottlenecks[0].rationale[:1]) or f"the kernel is {bottlenecks[0].cls.value}"
    where = f"at {label}: " if label else ""
    fits = f" (the pattern passes the gates at {len(seen)} of the op's {grid_size} GPU shapes)" if grid_size > 1 else ""
    return Hypothesis(
        pattern_id=pattern.id,
        text=f"{pattern.title}: {where}{effect}{fits}",
        prediction=prediction(pattern, min_speedup),
        shape=dict(shape),
        source="estimate" if bottlenecks[0].source == "estimate" else "profile",
    )
