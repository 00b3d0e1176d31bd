"""Retrieval quality over the labelled set (tests/retrieval_set/cases.yaml + the library's own examples).

The thresholds guard what was measured when the set was written (recall@3
0.87 over 70 cases, nothing already applied re-suggested); the full table is
`python -m patterns.retriever.quality`.
"""
import pytest

from patterns.library import load_library
from patterns.retriever.quality import evaluate_all, load_cases


@pytest.mark.slow
def test_recall_at_3_and_no_already_applied(tmp_path, monkeypatch):
    monkeypatch.setenv("PATTERNS_INDEX_DIR", str(tmp_path / "idx"))
    entries = load_library()
    outcomes, m = evaluate_all(load_cases(entries=entries), entries)
    assert m["cases"] >= 20 + 2 * len(entries) - 10
    assert m["already_applied_suggested"] == 0, [o.case.name for o in outcomes if o.applied_suggested]
    assert m["applied_not_recognised"] == 0, [o.case.name for o in outcomes if o.applied_missed]
    assert m["wrong_rate"] == 0.0, [(o.case.name, o.wrong) for o in outcomes if o.wrong]
    assert m["recall_at_3"] >= 0.85, [(o.case.name, o.misses) for o in outcomes if o.misses]
