"""SARIF 2.1.0 output of `patterns suggest`, for code-scanning tools.

Each library pattern is a rule; each suggestion is a result at the kernel's
line (the first line a condition matched on, else the kernel's def).
"""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

from patterns import __version__
from patterns.core.library import Entry
from patterns.core.records import SuggestReport

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"


def help_uri(entry: Entry, catalog_url: str | None = None) -> str:
    """The pattern's catalog page (`patterns docs` writes <id>.html) under --catalog-url or
    $PATTERNS_CATALOG_URL; without one, the pattern's folder in the library, as a file URI."""
    base = catalog_url or os.environ.get("PATTERNS_CATALOG_URL")
    if base:
        return f"{base.rstrip('/')}/{entry.id}.html"
    return (entry.folder / "pattern.yaml").resolve().as_uri()


def fingerprint(uri: str, kernel: str, pattern_id: str) -> str:
    """Stable across edits that move lines: the file, the kernel and the pattern, not the line."""
    return hashlib.sha256(f"{uri}\0{kernel}\0{pattern_id}".encode()).hexdigest()[:32]


def to_sarif(report: SuggestReport | list[SuggestReport], entries: list[Entry], catalog_url: str | None = None) -> dict:
    reports = report if isinstance(report, list) else [report]
    by_id = {e.id: e for e in entries}
    used = sorted({s.pattern_id for r in reports for k in r.kernels for s in k.suggestions})
    rules = []
    for pid in used:
        p = by_id[pid].pattern
        rules.append({
            "id": pid,
            "name": "".join(w.capitalize() for w in pid.split("_")),
            "shortDescription": {"text": p.title},
            "fullDescription": {"text": p.summary},
            "helpUri": help_uri(by_id[pid], catalog_url),
            "help": {"text": p.transformation.method, "markdown": f"**{p.title}**\n\n{p.summary}\n\n{p.transformation.method}"},
            "properties": {"category": p.category.value, "safety": p.safety.value, "tags": [p.category.value, *p.tags[:5]]},
        })
    index = {r["id"]: i for i, r in enumerate(rules)}
    results = []
    for k, uri in [(k, Path(r.file).as_posix()) for r in reports for k in r.kernels]:
        for s in k.suggestions:
            line = min(s.lines) if s.lines else k.line
            results.append({
                "ruleId": s.pattern_id,
                "ruleIndex": index[s.pattern_id],
                "level": "warning" if k.bottleneck.cls.value == "numerics-risk" and s.pattern_id in index else "note",
                "message": {"text": f"{k.kernel}: {s.title} — {k.bottleneck.cls.value}. " + "; ".join(s.matched[:3])
                            + (f". Expected: {s.expected_effect}" if s.expected_effect else "")},
                "locations": [{"physicalLocation": {"artifactLocation": {"uri": uri}, "region": {"startLine": max(1, line)}}}],
                "partialFingerprints": {"patternsKernelPattern/v1": fingerprint(uri, k.kernel, s.pattern_id)},
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
