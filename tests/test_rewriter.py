"""Rewrites, tested from the library: each pattern with an automatic rewrite is its own test data.

For every rewrite: after.py is byte for byte what apply writes on before.py
(so comments and formatting outside the edit survive, and the catalog's
before -> after diff is the rewrite's; tests/test_library.py runs after.py
against reference.py), applying again is a reported no-op, and the pattern's cases (patterns/library/<id>/cases/, see patterns.core.cases)
hold: each accept case rewrites to its .fixed.py byte for byte, each refuse
case is refused with its reason.
"""
from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

from patterns.core.cases import cases
from patterns.core.library import LIBRARY_DIR, load_library
from patterns.rewriter import REWRITES
from patterns.rewriter.base import AlreadyApplied, RewriteError, apply, write_candidate
from patterns.rewriter.edits import PlannedCodemod

WITH_REWRITE = [e for e in load_library() if e.pattern.transformation.rewrite]
IDS = [e.id for e in WITH_REWRITE]
CASES = [c for e in WITH_REWRITE for c in cases(e.folder)]
REFUSALS = [pytest.param(c, id=c.id) for c in CASES if c.refuse is not None]
ACCEPTED = [pytest.param(c, id=c.id) for c in CASES if c.fixed is not None]


def test_every_rewrite_belongs_to_a_pattern():
    named = {e.pattern.transformation.rewrite for e in load_library()}
    assert set(REWRITES) <= named, f"codemods without a pattern: {set(REWRITES) - named}"
    assert all(name in REWRITES for name in named if name)


@pytest.mark.parametrize("entry", WITH_REWRITE, ids=IDS)
def test_after_is_what_apply_writes_on_before(entry):
    src = entry.file("before.py").read_text(encoding="utf-8")
    got = apply(entry.id, src, "before.py", kernel=entry.pattern.example.kernel or None).candidate.source
    assert got == entry.file("after.py").read_text(encoding="utf-8"), \
        f"{entry.folder}/after.py is not what `patterns apply {entry.id} before.py` writes"


@pytest.mark.parametrize("entry", WITH_REWRITE, ids=IDS)
def test_after_is_a_reported_noop(entry):
    with pytest.raises(AlreadyApplied):
        apply(entry.id, entry.file("after.py").read_text(), "after.py", kernel=entry.pattern.example.kernel or None)


def test_every_codemod_is_a_planned_codemod():
    """One base: the rewrites share planning, edits and refusals through rewriter/edits.py."""
    assert not [name for name, cls in REWRITES.items() if not issubclass(cls, PlannedCodemod)]


def test_no_codemod_lists_sample_kernels():
    """Sample kernels are case files beside the pattern (rewriter/README.md), not ACCEPTS/REFUSES lists in code."""
    listed = [name for name, cls in REWRITES.items() if hasattr(cls, "ACCEPTS") or hasattr(cls, "REFUSES")]
    assert not listed, f"move these lists to patterns/library/<id>/cases/ (see rewriter/README.md): {listed}"


def test_every_rewrite_has_a_refuse_case():
    """before.py -> after.py is every rewrite's first accept case; what it refuses is shown by a case."""
    refused = {c.pattern for c in CASES if c.refuse is not None}
    assert not [e.id for e in WITH_REWRITE if e.id not in refused]


@pytest.mark.parametrize("name", sorted(n for n, c in REWRITES.items() if c.SCOPE == "kernel"))
def test_kernel_codemod_refuses_a_file_without_a_kernel(name):
    with pytest.raises(RewriteError, match="no Triton kernel"):
        apply(name, "def f():\n    return 1\n", "case.py")


@pytest.mark.parametrize("case", REFUSALS)
def test_codemod_refuses_unsupported_code(case):
    with pytest.raises(RewriteError, match=case.refuse):
        apply(case.pattern, case.source(), "case.py", kernel=case.kernel, params=case.params)


# --------------------------------------------------------------------------------------
# the command line: diffs, --write, bad input
# --------------------------------------------------------------------------------------

TF32 = LIBRARY_DIR / "tf32x3_dot_precision"


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "patterns.cli", *map(str, args)], capture_output=True, text=True, timeout=300,
                          env=dict(os.environ))


def test_apply_prints_a_diff_and_leaves_the_file(tmp_path):
    f = tmp_path / "k.py"
    f.write_text(TF32.joinpath("before.py").read_text())
    before = f.read_bytes()
    r = run_cli("apply", "tf32x3_dot_precision", f)
    assert r.returncode == 0, r.stderr
    assert '+        b_h = tl.dot(b_m.to(tl.float32), b_h, input_precision="tf32x3") + b_hl' in r.stdout
    assert "numerics-changing" in r.stderr
    assert f.read_bytes() == before


def test_apply_write_is_atomic_with_backup(tmp_path):
    f = tmp_path / "k.py"
    f.write_text(TF32.joinpath("before.py").read_text())
    r = run_cli("apply", "tf32x3_dot_precision", f, "--write")
    assert r.returncode == 0, r.stderr
    assert f.read_text() == TF32.joinpath("after.py").read_text()
    assert (tmp_path / "k.py.orig").read_text() == TF32.joinpath("before.py").read_text()
    r = run_cli("apply", "tf32x3_dot_precision", f, "--write")
    assert r.returncode == 0 and "no-op" in r.stderr


def test_write_refuses_a_file_changed_since_analysis(tmp_path):
    f = tmp_path / "k.py"
    f.write_text(TF32.joinpath("before.py").read_text())
    cand = apply("tf32x3_dot_precision", f.read_text(), str(f)).candidate
    f.write_text(f.read_text() + "\n# edited meanwhile\n")
    with pytest.raises(RewriteError, match="changed since it was analysed"):
        write_candidate(cand, f)
    assert f.read_text().endswith("# edited meanwhile\n")


def test_a_second_write_keeps_the_first_original(tmp_path):
    f = tmp_path / "k.py"
    original = TF32.joinpath("before.py").read_text()
    f.write_text(original)
    write_candidate(apply("tf32x3_dot_precision", original, str(f)).candidate, f)
    # the user goes back to an edited copy of the original and rewrites it again: FILE.orig still holds the first
    edited = original + "\n# edited\n"
    f.write_text(edited)
    cand = apply("tf32x3_dot_precision", edited, str(f)).candidate
    assert write_candidate(cand, f) == tmp_path / "k.py.orig"
    assert (tmp_path / "k.py.orig").read_text() == original


def test_two_writers_in_the_check_to_write_window_lose_no_rewrite(tmp_path):
    import fcntl
    import threading

    f = tmp_path / "k.py"
    f.write_text(TF32.joinpath("before.py").read_text())
    first = apply("tf32x3_dot_precision", f.read_text(), str(f)).candidate
    second = apply("tf32x3_dot_precision", f.read_text(), str(f)).candidate
    outcome = {}
    with open(f, "rb") as held:  # the first writer holds the file's lock, inside its window
        fcntl.flock(held, fcntl.LOCK_EX)

        def other():
            try:
                write_candidate(second, f)
                outcome["second"] = "wrote"
            except RewriteError as e:
                outcome["second"] = str(e)

        t = threading.Thread(target=other)
        t.start()
        t.join(timeout=1.0)
        assert t.is_alive()  # waits for the lock instead of writing
        f.write_text(first.source)  # the first writer's rewrite lands
        fcntl.flock(held, fcntl.LOCK_UN)
    t.join(timeout=30)
    assert "changed since it was analysed" in outcome["second"]
    assert f.read_text() == first.source


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["apply", "tf32x3_dot_precision", "SYNTAX"], "syntax error"),
        (["apply", "no_such_pattern", "GOOD"], "unknown pattern"),
        (["apply", "fuse_v_tiles" if "fuse_v_tiles" not in REWRITES else "welford_reduction", "GOOD"], "no automatic rewrite"),
        (["apply", "tf32x3_dot_precision", "GOOD", "--param", "precision=fp64"], "not one of"),
        (["apply", "tf32x3_dot_precision", "GOOD", "--param", "nope=1"], "unknown parameter"),
        (["apply", "tf32x3_dot_precision", "GOOD", "--kernel", "missing_kernel"], "no kernel named"),
        (["apply", "tf32x3_dot_precision", "MISSING"], "no such file"),
    ],
    ids=["syntax", "unknown-pattern", "no-rewrite", "bad-choice", "unknown-param", "unknown-kernel", "missing-file"],
)
def test_apply_bad_input_one_line_exit_2_file_untouched(args, message, tmp_path):
    good = tmp_path / "good.py"
    good.write_text(TF32.joinpath("before.py").read_text())
    bad = tmp_path / "bad.py"
    bad.write_text("import triton\n@triton.jit\ndef k(x:\n")
    paths = {"GOOD": good, "SYNTAX": bad, "MISSING": tmp_path / "missing.py"}
    snapshot = {p: p.read_bytes() for p in (good, bad)}
    r = run_cli(*[paths.get(a, a) for a in args], "--write")
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and message in lines[0], r.stderr
    assert "Traceback" not in r.stderr
    assert {p: p.read_bytes() for p in (good, bad)} == snapshot
    assert not list(tmp_path.glob("*.orig"))


# --------------------------------------------------------------------------------------
# more kernels than the examples: every accept case rewrites to its .fixed.py
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", ACCEPTED)
def test_codemod_accepts_more_kernels(case):
    """apply() itself checks that the result parses and satisfies present_when; the output is the .fixed.py."""
    got = apply(case.pattern, case.source(), "case.py", kernel=case.kernel, params=case.params).candidate.source
    assert got != case.source()
    assert got == case.fixed.read_text(encoding="utf-8"), f"{case.fixed} is not what apply writes"


RUNS = [pytest.param(c, id=c.id) for c in CASES if c.fixed is not None and c.run]


@pytest.mark.parametrize("case", RUNS)
def test_accept_case_agrees_with_its_input(case):
    """The `# run:` reference run: the rewritten case computes what the case itself computes."""
    from patterns.core import interpreter
    from patterns.core.cases import run_call
    from patterns.core.examples import compare, load_module
    from patterns.core.library import get

    ex = get(case.pattern).pattern.example
    if ex.gpu_only and not torch.cuda.is_available():
        pytest.skip(f"GPU-only example: {ex.gpu_only}")
    interpreter.enable()
    entry, inputs = run_call(case)
    want = getattr(load_module(case.path, "_case"), entry)(**{k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in inputs.items()})
    got = getattr(load_module(case.fixed, "_fixed"), entry)(**inputs)
    ok, aerr, _, reason = compare(got, want, ex.atol, ex.rtol)
    assert ok, f"{case.id}: {reason} (max abs error {aerr:.3g})"
