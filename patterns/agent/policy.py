"""What the agent does next, decided by what the last check said. Rules as data: ACTIONS.

An attempt ends in one outcome at one layer (the first failing check, in the
gate's order: correctness, partition, integrity, performance). ACTIONS maps
that (outcome, layer) to the next action; `follow_ups` turns the action into
the next attempts. When an action has nothing left to try (no untried
parameter value, no numerics pattern that applies) the agent falls back to
the next pattern in the ranked plan; when the plan is empty it stops.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any, Iterable

from patterns.core.library import Entry
from patterns.core.records import Attempt, EvidenceBundle
from patterns.core.schema import BottleneckClass, Category

LAYER_ORDER = ("correctness", "partition", "integrity", "overlap", "performance", "serving")


class Action(str, Enum):
    review = "review"  # passed: write a review item
    next_param = "next-param"  # same pattern, the next value the rewrite declares for a parameter
    numerics_pattern = "numerics-pattern"  # stack a numerics pattern on this candidate
    restore_undone = "restore-undone"  # re-apply on this candidate what held on the target and the rewrite undid
    next_pattern = "next-pattern"  # give this pattern up, continue with the plan


# (outcome, layer) -> action; (outcome, "*") is the default for the outcome
ACTIONS: dict[tuple[str, str], Action] = {
    ("passed", "*"): Action.review,
    # a rewrite that refuses, is already applied, or does not import: nothing to tune
    ("refused", "*"): Action.next_pattern,
    ("already-applied", "*"): Action.next_pattern,
    ("invalid", "*"): Action.next_pattern,
    # wrong output on some shape: the parameter may not fit it (a block larger than the dim, too many splits)
    ("failed", "correctness"): Action.next_param,
    # error grows with the number of partitions: the precision of the merge is the problem
    ("failed", "partition"): Action.numerics_pattern,
    # cheat-like behaviour (skipped work, patched torch, cached results): never tuned around
    ("failed", "integrity"): Action.next_pattern,
    # slower on the GPU: the rewrite may have undone what made the target fast (fusing V
    # tiles cuts the grid the target's split had sized to the SMs): restore that first,
    # then another launch parameter may pay where this one did not
    ("failed", "performance"): Action.restore_undone,
    ("failed", "*"): Action.next_pattern,
}


def action_for(outcome: str, layer: str) -> Action:
    return ACTIONS.get((outcome, layer)) or ACTIONS[(outcome, "*")]


@dataclass(frozen=True)
class Planned:
    """An attempt to make: a pattern with parameters, on the target or on an earlier candidate."""

    pattern_id: str
    params: dict[str, Any]
    base: str = "target"  # or the sha256 of the candidate it builds on
    origin: str = "rewrite"
    kernel: str = ""  # the kernel the retriever matched; empty: the rewrite picks

    @property
    def key(self) -> tuple[str, str, str]:
        return Attempt(step=1, pattern_id=self.pattern_id, params=self.params, base=self.base, outcome="passed").key


def first_failure(bundle: EvidenceBundle) -> tuple[str, str]:
    """(layer, reason) of the first failing check in the gate's layer order; ('', '') when it passed."""
    failing = [c for c in bundle.checks if c.passed is False]
    if not failing:
        return "", ""
    failing.sort(key=lambda c: LAYER_ORDER.index(c.layer) if c.layer in LAYER_ORDER else len(LAYER_ORDER))
    return failing[0].layer, failing[0].reason


def defaults(entry: Entry, sm: int = 0) -> dict[str, Any]:
    """The rewrite's parameter defaults on the GPU the plan targets (compute capability `sm` x10; 0: the plain defaults)."""
    return {name: p.default_for(sm) for name, p in entry.pattern.transformation.params.items()}


def next_param(entry: Entry, tried: Iterable[dict[str, Any]], sm: int = 0) -> dict[str, Any] | None:
    """The first parameter setting not tried yet: one declared choice changed from the defaults at a time."""
    seen = [dict(t) for t in tried]
    base = defaults(entry, sm)
    for name, p in entry.pattern.transformation.params.items():
        for value in p.choices:
            params = {**base, name: value}
            if params not in seen:
                return params
    return None


def fits(source: str, path: str, entry: Entry) -> bool:
    """The pattern's applies_when conditions hold on some kernel of `source` (a numerics fix for a
    candidate: int64 offsets do not help a split whose error grows, nor tf32x3 a kernel without fp32 dots)."""
    from patterns.core.facts import extract_source
    from patterns.core.predicates import Subject, evaluate

    cond = entry.pattern.applies_when.conditions
    facts = extract_source(source, path)
    return cond is None or any(evaluate(cond, Subject(facts, k)).ok for k in facts.kernels)


def undone_patterns(source: str, path: str, applied_on_target: Iterable[str], entries: dict[str, Entry]) -> list[str]:
    """Patterns with a rewrite that held on the target (its "already applied") and hold on no kernel of `source`."""
    from patterns.core.facts import extract_source
    from patterns.core.predicates import Subject, evaluate

    facts = extract_source(source, path)
    undone = []
    for pid in applied_on_target:
        entry = entries.get(pid)
        if entry is None or not entry.pattern.transformation.rewrite or not facts.kernels:
            continue
        if not any(evaluate(entry.pattern.present_when, Subject(facts, k)).ok for k in facts.kernels):
            undone.append(pid)
    return undone


def is_numerics(entry: Entry) -> bool:
    p = entry.pattern
    return p.category == Category.numerics or BottleneckClass.numerics in p.applies_when.bottlenecks


def follow_ups(
    attempt: Attempt, entries: dict[str, Entry], tried: dict[tuple[str, str], list[dict[str, Any]]], kernel: str = "",
    undone: Iterable[str] = (), sm: int = 0, source: str = "",
) -> tuple[Action, list[Planned]]:
    """The action the attempt's outcome calls for, and the attempts it adds (first in the queue).

    `tried` maps (pattern, base) to the parameter settings already attempted on that base;
    `kernel` is the kernel the attempt targeted (kept when the same pattern is retried);
    `undone` lists what held on the target but not on this candidate (`undone_patterns`);
    `sm` is the compute capability of the GPU the plan targets (parameter defaults, `defaults`);
    `source` is the candidate's text: numerics patterns stacked on it are those whose conditions hold there.
    """
    action = action_for(attempt.outcome, attempt.layer)
    entry = entries.get(attempt.pattern_id)
    if action == Action.restore_undone and attempt.sha256:
        restores = [Planned(pid, defaults(entries[pid], sm), attempt.sha256) for pid in undone
                    if pid in entries and pid != attempt.pattern_id and not tried.get((pid, attempt.sha256))]
        if restores:
            return action, restores
        action = Action.next_param
    if action == Action.next_param and entry is not None and attempt.origin == "rewrite":
        params = next_param(entry, tried.get((attempt.pattern_id, attempt.base), []), sm)
        if params is not None:
            return action, [Planned(attempt.pattern_id, params, attempt.base, kernel=kernel)]
    if action == Action.numerics_pattern and attempt.sha256:
        fixes = [
            Planned(e.id, defaults(e, sm), attempt.sha256)
            for e in entries.values()
            if is_numerics(e) and e.pattern.transformation.rewrite and e.id != attempt.pattern_id and not tried.get((e.id, attempt.sha256))
            and (not source or fits(source, attempt.candidate or "candidate.py", e))
        ]
        if fixes:
            return action, fixes
    if action in (Action.next_param, Action.numerics_pattern):
        return Action.next_pattern, []
    return action, []
