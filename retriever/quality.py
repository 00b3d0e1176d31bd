"""Retrieval quality over a labelled set of kernels: recall@3 and wrong / already-applied rates.

    python -m patterns.retriever.quality [tests/retrieval_set/cases.yaml]

Cases come from the curated set (kernels written by the project, each with the
techniques an expert would reach for and those it already applies) and from
the library itself: every pattern's before.py expects the pattern, and its
after.py applies it.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from patterns.core.library import Entry, load_library
from patterns.retriever.retrieve import suggest

DEFAULT_CASES = Path(__file__).resolve().parents[1] / "tests" / "retrieval_set" / "cases.yaml"
K = 3


@dataclass
class Case:
    name: str
    path: Path
    kernel: str | None = None
    shapes: dict[str, int] = field(default_factory=dict)
    dtype: str = "bfloat16"
    dtypes: dict[str, str] = field(default_factory=dict)
    expected: list[str] = field(default_factory=list)
    applied: list[str] = field(default_factory=list)
    wrong: list[str] = field(default_factory=list)
    triton: str | None = None  # the Triton the case is written for (default: the installed one)


# Triton releases a version-gated example may be written for; the newest its gate allows is used
TRITON_RELEASES = ["3.2.0", "3.3.0", "3.4.0", "3.5.0", "3.6.0", "3.7.0", "3.8.0", "3.9.0"]


def triton_for(spec: str | None) -> str | None:
    if not spec:
        return None
    from patterns.retriever.retrieve import triton_allows

    return next((v for v in reversed(TRITON_RELEASES) if triton_allows(spec, v)), None)


@dataclass
class Outcome:
    case: Case
    top: list[str]
    already: list[str]
    hits: list[str]
    misses: list[str]
    wrong: list[str]
    applied_suggested: list[str]
    applied_missed: list[str]


def load_cases(path: Path = DEFAULT_CASES, entries: list[Entry] | None = None) -> list[Case]:
    cases = []
    # cases.yaml and its companions cases.<topic>.yaml beside it: one file per
    # area of the library, so the set grows without one file everyone edits
    files = [path] + (sorted(path.parent.glob(f"{path.stem}.*.yaml")) if path.suffix == ".yaml" else [])
    raws = [raw for f in files for raw in (yaml.safe_load(f.read_text()) or [])]
    for raw in raws:
        cases.append(Case(
            name=raw["file"], path=path.parent / raw["file"], kernel=raw.get("kernel"), shapes=raw.get("shapes", {}),
            dtype=raw.get("dtype", "bfloat16"), dtypes=raw.get("dtypes", {}), expected=raw.get("expected", []),
            applied=raw.get("applied", []), wrong=raw.get("wrong", []), triton=raw.get("triton"),
        ))
    from patterns.core.facts import extract_file

    for e in entries or []:
        ex = e.pattern.example
        for which, key in (("before.py", "expected"), ("after.py", "applied")):
            path = e.file(which)
            names = {k.name for k in extract_file(path).kernels}
            kernel = ex.kernel if ex and ex.kernel in names else None  # before and after may name the kernel differently
            cases.append(Case(name=f"{e.id}/{which}", path=path, kernel=kernel, triton=triton_for(e.pattern.applies_when.triton),
                              **{key: [e.id]}))
    return cases


def run_case(case: Case, entries: list[Entry]) -> Outcome:
    report = suggest(case.path, kernel=case.kernel, shapes=case.shapes, dtype=case.dtype, dtype_overrides=case.dtypes,
                     top=K, entries=entries, triton=case.triton)
    top, already = [], []
    for k in report.kernels:
        top += [s.pattern_id for s in k.suggestions]
        already += [s.pattern_id for s in k.already_applied]
    # over several kernels of one file, keep the best-ranked K distinct ids
    seen: list[str] = []
    for pid in top:
        if pid not in seen:
            seen.append(pid)
    top = seen[:K] if len(report.kernels) == 1 else seen
    return Outcome(
        case=case, top=top, already=already,
        hits=[p for p in case.expected if p in top], misses=[p for p in case.expected if p not in top],
        wrong=[p for p in top if p in case.wrong],
        applied_suggested=[p for p in case.applied if p in top],
        applied_missed=[p for p in case.applied if p not in already],
    )


def evaluate_all(cases: list[Case], entries: list[Entry]) -> tuple[list[Outcome], dict[str, float]]:
    outcomes = [run_case(c, entries) for c in cases]
    with_expected = [o for o in outcomes if o.case.expected]
    recall = sum(len(o.hits) / len(o.case.expected) for o in with_expected) / max(1, len(with_expected))
    n_top = sum(len(o.top) for o in outcomes)
    metrics = {
        "cases": len(outcomes),
        "recall_at_3": recall,
        "top3_suggestions": n_top,
        "wrong_rate": sum(len(o.wrong) for o in outcomes) / max(1, n_top),
        "already_applied_suggested": sum(len(o.applied_suggested) for o in outcomes),
        "already_applied_rate": sum(len(o.applied_suggested) for o in outcomes) / max(1, n_top),
        "applied_not_recognised": sum(len(o.applied_missed) for o in outcomes),
    }
    return outcomes, metrics


def markdown_report(outcomes: list[Outcome], m: dict[str, float]) -> str:
    """The same table as Markdown, for a committed report."""
    lines = [
        "# Retrieval quality",
        "",
        f"Generated by `python -m patterns.retriever.quality --markdown FILE` over {m['cases']} cases: the curated kernels "
        "of tests/retrieval_set/cases.yaml, and every library pattern's before.py (expects the pattern) and after.py "
        "(applies it).",
        "",
        "| metric | value |",
        "| --- | --- |",
        f"| cases | {m['cases']} |",
        f"| recall@{K} (cases with expected patterns) | {m['recall_at_3']:.3f} |",
        f"| top-{K} suggestions | {m['top3_suggestions']} |",
        f"| wrong suggestions (labelled wrong) | {m['wrong_rate']:.3f} |",
        f"| already-applied patterns suggested | {m['already_applied_suggested']} ({m['already_applied_rate']:.3f}) |",
        f"| applied but not recognised | {m['applied_not_recognised']} |",
        "",
        f"| case | expected | top-{K} | already applied | verdict |",
        "| --- | --- | --- | --- | --- |",
    ]
    for o in outcomes:
        lines.append(f"| {o.case.name} | {', '.join(o.case.expected)} | {', '.join(o.top)} | {', '.join(o.already)} | {_verdict(o)} |")
    return "\n".join(lines) + "\n"


def _verdict(o: Outcome) -> str:
    bad = ([f"missed {', '.join(o.misses)}"] if o.misses else []) + ([f"wrong {', '.join(o.wrong)}"] if o.wrong else []) \
        + ([f"re-suggested {', '.join(o.applied_suggested)}"] if o.applied_suggested else []) \
        + ([f"not recognised {', '.join(o.applied_missed)}"] if o.applied_missed else [])
    return "; ".join(bad) or "ok"


def main(argv: list[str] | None = None) -> int:
    import argparse

    from rich.console import Console
    from rich.table import Table

    ap = argparse.ArgumentParser(prog="python -m patterns.retriever.quality")
    ap.add_argument("cases", nargs="?", type=Path, default=DEFAULT_CASES, help="cases.yaml of the curated set")
    ap.add_argument("--markdown", type=Path, help="also write the report as Markdown to this file")
    args = ap.parse_args(argv)
    entries = load_library()
    outcomes, m = evaluate_all(load_cases(args.cases, entries), entries)
    t = Table("case", "expected", "top-3", "already applied", "verdict", title="retrieval quality", title_justify="left")
    for o in outcomes:
        v = _verdict(o)
        t.add_row(o.case.name, ", ".join(o.case.expected), ", ".join(o.top), ", ".join(o.already), "[green]ok[/]" if v == "ok" else f"[red]{v}[/]")
    console = Console(width=200)
    console.print(t)
    console.print(
        f"cases {m['cases']} · recall@3 {m['recall_at_3']:.3f} · wrong {m['wrong_rate']:.3f} · "
        f"already-applied suggested {m['already_applied_suggested']} ({m['already_applied_rate']:.3f}) · "
        f"applied but not recognised {m['applied_not_recognised']}"
    )
    if args.markdown:  # whole or not at all
        tmp = args.markdown.with_name(args.markdown.name + ".tmp")
        tmp.write_text(markdown_report(outcomes, m))
        tmp.replace(args.markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
