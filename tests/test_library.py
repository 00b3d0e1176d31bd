"""Tests generated from the library: every pattern folder is its own test data.

For each pattern: the schema loads, `present_when` is false on before.py and
true on after.py, and both examples agree with reference.py on every declared
shape and seed (outputs NaN-filled before launch). GPU-only examples are checked
for syntax and structure here and run on a GPU machine.
"""
import pytest
import torch

from patterns.core.examples import run_example
from patterns.core.library import check_entry, load_library

ENTRIES = load_library()
IDS = [e.id for e in ENTRIES]


def test_library_size():
    assert len(ENTRIES) >= 1
    assert len(set(IDS)) == len(IDS)


@pytest.mark.parametrize("entry", ENTRIES, ids=IDS)
def test_structure(entry):
    assert check_entry(entry) == []


@pytest.mark.parametrize("which", ["before", "after"])
@pytest.mark.parametrize("entry", ENTRIES, ids=IDS)
def test_example_matches_reference(entry, which):
    ex = entry.pattern.example
    if ex.gpu_only and not torch.cuda.is_available():
        pytest.skip(f"GPU-only example: {ex.gpu_only}")
    runs = run_example(entry, which, device="cuda" if torch.cuda.is_available() else "cpu")
    failed = [r for r in runs if not r.passed]
    assert not failed, f"{which}.py {failed[0].shape} seed={failed[0].seed}: {failed[0].reason}"
    assert len(runs) == len(ex.shapes) * len(ex.seeds)
