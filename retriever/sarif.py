"""SARIF 2.1.0 output of `patterns suggest`, for code-scanning tools.

Each library pattern is a rule; each suggestion is a result at the kernel's
line (the first line a condition matched on, else the kernel's def).
"""
from __future__ import annotations

from pathlib import Path

from patterns import __version__
from patterns.core.library import Entry
from patterns.core.records import SuggestReport

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"


def to_sarif(report: SuggestReport, entries: list[Entry]) -> dict:
    by_id = {e.id: e for e in entries}
    used = sorted({s.pattern_id for k in report.kernels for s in k.suggestions})
    rules = []
    for pid in used:
        p = by_id[pid].pattern
        rules.append({
            "id": pid,
            "name": "".join(w.capitalize() for w in pid.split("_")),
            "shortDescription": {"text": p.title},
            "fullDescription": {"text": p.summary},
            "help": {"text": p.transformation.method, "markdown": f"**{p.title}**\n\n{p.summary}\n\n{p.transformation.method}"},
            "properties": {"category": p.category.value, "safety": p.safety.value, "tags": [p.category.value, *p.tags[:5]]},
        })
    index = {r["id"]: i for i, r in enumerate(rules)}
    uri = Path(report.file).as_posix()
    results = []
    for k in report.kernels:
        for s in k.suggestions:
            line = min(s.lines) if s.lines else k.line
            results.append({
                "ruleId": s.pattern_id,
                "ruleIndex": index[s.pattern_id],
                "level": "warning" if k.bottleneck.cls.value == "numerics-risk" and s.pattern_id in index else "note",
                "message": {"text": f"{k.kernel}: {s.title} — {k.bottleneck.cls.value}. " + "; ".join(s.matched[:3])
                            + (f". Expected: {s.expected_effect}" if s.expected_effect else "")},
                "locations": [{"physicalLocation": {"artifactLocation": {"uri": uri}, "region": {"startLine": max(1, line)}}}],
                "properties": {"score": s.score, "kernel": k.kernel, "safety": s.safety.value, "rewrite": s.rewrite},
            })
    return {
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {"name": "patterns", "version": __version__, "rules": rules}},
            "results": results,
        }],
    }
