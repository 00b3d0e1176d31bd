"""The adversarial cheat suite (issue #20): every cheat under tests/cheats/adversarial/<op>/ is rejected
for its own reason, and honest rewrites of the same ops pass.

Each cheat file's docstring says what it does, why the gate must reject it, and one
or more `EXPECT: <check name> | <start of its reason>` lines: the failing checks the
bundle must hold. The ops (reduced to one CPU shape and one dtype) are in
tests/cheats/adversarial/specs.py.
"""
import builtins
import re
import time
from pathlib import Path

import pytest
import torch

import patterns.core.compare as compare_mod
from patterns.validation import integrity
from patterns.validation.gate import validate

HERE = Path(__file__).parent / "cheats" / "adversarial"
SPECS = __import__("runpy").run_path(str(HERE / "specs.py"))["SPECS"]
CHEATS = sorted(p for p in HERE.glob("*/*.py"))
# an honest call takes a second or two here: a hang is found in 30 s, not 3 minutes
QUICK = {op: __import__("dataclasses").replace(spec, call_timeout_s=30.0) for op, spec in SPECS.items()}


def expectations(path: Path) -> list[tuple[str, str]]:
    doc = path.read_text().split('"""')[1]
    return [tuple(part.strip() for part in m.split("|", 1)) for m in re.findall(r"^EXPECT: (.+)$", doc, re.M)]


def test_the_suite_covers_enough():
    ops = {p.parent.name for p in CHEATS}
    assert len(CHEATS) >= 25 and ops == set(SPECS) and len(ops) >= 3
    for path in CHEATS:
        doc = path.read_text().split('"""')[1]
        assert doc.startswith("Cheat: ") and "Rejected because: " in doc and expectations(path), path.name


@pytest.mark.parametrize("path", CHEATS, ids=lambda p: f"{p.parent.name}-{p.stem}")
def test_cheat_is_rejected_for_its_reason(path):
    gate_functions = (compare_mod.first_mismatch, integrity.check_integrity, torch.isclose, torch.allclose, builtins.abs, builtins.max)
    state = (torch.get_default_dtype(), torch.get_num_threads())
    bundle = validate(QUICK[path.parent.name], path, device="cpu")
    # nothing the candidate did reached this process
    assert (compare_mod.first_mismatch, integrity.check_integrity, torch.isclose, torch.allclose, builtins.abs, builtins.max) == gate_functions
    assert (torch.get_default_dtype(), torch.get_num_threads()) == state
    assert not bundle.passed
    failing = [(c.name, c.reason) for c in bundle.checks if c.passed is False]
    for name, reason in expectations(path):
        assert any(n == name and r.startswith(reason) for n, r in failing), f"{path.name}: no failing '{name}' check starting {reason!r}; got {failing}"
    (speed,) = [c for c in bundle.checks if c.layer == "performance"]
    assert speed.passed is None


def test_planted_files_never_land():
    assert not Path("/tmp/patterns-cheat-planted.txt").exists()
    assert not (Path.home() / ".local" / "share" / "patterns-cheat-registry").exists()


ROOT = Path(__file__).parents[1]
HONEST = {
    "rowdot": [ROOT / "tests" / "candidates" / "honest_rowdot.py", ROOT / "tests" / "validation_op" / "baseline.py"],
    "kda_decode": [ROOT / "kernels" / "kda_decode" / "baseline.py", *sorted((ROOT / "evidence" / "gpu" / "h200-kda_decode").glob("candidate-*.py"))],
    "rmsnorm_gate": [ROOT / "kernels" / "rmsnorm_gate" / "baseline.py"],
    "rowdot_fp16": [ROOT / "tests" / "candidates" / "honest_rowdot.py", ROOT / "tests" / "validation_op" / "baseline.py"],
}


@pytest.mark.parametrize("op,path", [(op, p) for op, paths in HONEST.items() for p in paths], ids=lambda x: x if isinstance(x, str) else x.stem)
def test_honest_rewrites_pass(op, path):
    bundle = validate(SPECS[op], path, device="cpu")
    assert [c.reason for c in bundle.checks if c.passed is False] == []
    assert bundle.passed


def test_an_installed_library_may_add_its_own_audit_hook(tmp_path, monkeypatch):
    """filelock >= 3.20 adds an audit hook at import on Python 3.12+, and torch and FLA import it: an
    honest candidate importing such a library is not rejected; the same call from the candidate is
    (rowdot/audit_hook.py)."""
    lib = tmp_path / "site-packages" / "hooking_lib"
    lib.mkdir(parents=True)
    (lib / "__init__.py").write_text("import sys\n\nsys.addaudithook(lambda event, args: None)\nADDED = True\n")
    monkeypatch.setenv("PYTHONPATH", f"{tmp_path / 'site-packages'}:{__import__('os').environ.get('PYTHONPATH', '')}")
    candidate = tmp_path / "honest_with_hooking_lib.py"
    candidate.write_text("import hooking_lib\n\nassert hooking_lib.ADDED\n" + HONEST["rowdot"][0].read_text())
    bundle = validate(QUICK["rowdot"], candidate, device="cpu")
    assert [c.reason for c in bundle.checks if c.passed is False] == []
    assert bundle.passed


def test_torch_private_state_a_library_fills_is_no_patching(tmp_path, monkeypatch):
    """FLA reads the device at import on the H200 (torch.cuda.device_count fills
    torch.cuda._cached_device_count, lazy init sets _initialized): private values of torch filled by an
    installed library are no patching; a private function replaced still is (the candidate's own
    assignments are found by the static scan as well)."""
    lib = tmp_path / "site-packages" / "device_reading_lib"
    lib.mkdir(parents=True)
    (lib / "__init__.py").write_text("import torch\n\ntorch.cuda._cached_device_count = 0\ntorch.cuda._initialized = bool(torch.cuda._initialized)\n")
    monkeypatch.setenv("PYTHONPATH", f"{tmp_path / 'site-packages'}:{__import__('os').environ.get('PYTHONPATH', '')}")
    honest = tmp_path / "honest.py"
    honest.write_text("import device_reading_lib  # noqa: F401\n" + HONEST["rowdot"][0].read_text())
    bundle = validate(QUICK["rowdot"], honest, device="cpu")
    assert [c.reason for c in bundle.checks if c.passed is False] == [] and bundle.passed
    (lib / "__init__.py").write_text("import torch\n\ntorch.cuda._lazy_init = lambda: None\n")
    bundle = validate(QUICK["rowdot"], honest, device="cpu")
    failing = [c.reason for c in bundle.checks if c.passed is False]
    assert not bundle.passed and any(r.startswith("integrity: patches torch.cuda._lazy_init (at import)") for r in failing), failing
