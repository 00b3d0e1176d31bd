"""The serving registry: seeding, versions, promote/rollback, durability, the lock, load_live, the CLI."""
from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from patterns.core.files import sha256_hex
from patterns.serving import registry as registry_mod
from patterns.serving.registry import Registry, RegistryError, load_live
from patterns.core.ops import kernels_dir

OP = "rmsnorm_gate"


@pytest.fixture
def reg(tmp_path: Path) -> Registry:
    return Registry(tmp_path / "registry")


def _variant(tmp_path: Path, name: str, marker: str) -> Path:
    """A copy of the op's baseline whose launcher also reports `marker` (so tests can tell versions apart)."""
    src = (kernels_dir() / OP / "baseline.py").read_text()
    path = tmp_path / f"{name}.py"
    path.write_text(src + f"\n\n{OP}.version_marker = {marker!r}\n")
    return path


def test_seeds_baseline_as_version_1(reg: Registry) -> None:
    live = reg.live(OP)
    baseline = kernels_dir() / OP / "baseline.py"
    assert (live.version, live.symbol, live.pattern, live.accepted_by) == (1, OP, "", "seed")
    assert Path(live.file).read_bytes() == baseline.read_bytes()
    assert live.sha256 == sha256_hex(baseline.read_bytes())
    assert Path(live.file).parent == reg.root / "objects"
    on_disk = json.loads(reg.path.read_text())
    assert on_disk["ops"][OP]["versions"][0]["file"] == f"objects/{live.sha256}.py"  # relative on disk


def test_status_lists_every_op(reg: Registry) -> None:
    status = reg.status()
    assert sorted(status) == sorted(p.parent.name for p in kernels_dir().glob("*/spec.py"))
    assert all(v.version == 1 for v in status.values())


def test_register_promote_rollback(reg: Registry, tmp_path: Path) -> None:
    bundle = tmp_path / "ev.json"
    bundle.write_text("{}")
    v2 = reg.register(OP, _variant(tmp_path, "a", "v2"), symbol=OP, pattern="cache_eviction_hints", bundle=bundle, accepted_by="alice")
    assert v2.version == 2 and reg.live(OP).version == 1  # registered is not live
    assert v2.bundle == str(bundle.resolve()) and v2.accepted_by == "alice" and v2.pattern == "cache_eviction_hints"
    v3 = reg.register(OP, _variant(tmp_path, "b", "v3"), symbol=OP, pattern="p", bundle=None, accepted_by="bob")
    assert reg.promote(OP, 2).version == 2
    assert reg.promote(OP, 3).version == 3
    assert reg.trail(OP) == [1, 2, 3]
    assert reg.rollback(OP).version == 2
    assert reg.rollback(OP).version == 1
    with pytest.raises(RegistryError, match="nothing to roll back to"):
        reg.rollback(OP)
    assert [v.version for v in reg.history(OP)] == [1, 2, 3]
    assert Path(v3.file).is_file() and Path(v2.file).is_file()  # old code kept for rollbacks


def test_load_live_runs_the_live_version(reg: Registry, tmp_path: Path) -> None:
    from patterns.kernels.rmsnorm_gate.spec import SPEC
    from patterns.kernels.rmsnorm_gate.naive import naive_rmsnorm_gate

    base = load_live(OP, reg)
    assert not hasattr(base, "version_marker") and base.__name__ == OP
    assert load_live(OP, reg) is base  # imported once per version
    shape = SPEC.shapes[0]
    inputs = SPEC.make_inputs(shape, "float32", 0, "cpu")
    out = base(**inputs)
    ref = naive_rmsnorm_gate(**SPEC.make_inputs(shape, "float32", 0, "cpu"))
    torch.testing.assert_close(out, ref, atol=1e-4, rtol=1e-4)

    v2 = reg.register(OP, _variant(tmp_path, "a", "v2"), symbol=OP, pattern="p", bundle=None, accepted_by="alice")
    reg.promote(OP, v2.version)
    assert load_live(OP, reg).version_marker == "v2"
    reg.rollback(OP)
    assert load_live(OP, reg) is base


def test_bad_input(reg: Registry, tmp_path: Path) -> None:
    with pytest.raises(RegistryError, match="unknown op 'nope'"):
        reg.live("nope")
    with pytest.raises(RegistryError, match="no version 7"):
        reg.promote(OP, 7)
    with pytest.raises(RegistryError, match="cannot read"):
        reg.register(OP, tmp_path / "missing.py", symbol=OP, pattern="p", bundle=None, accepted_by="a")
    with pytest.raises(RegistryError, match="must be named"):
        reg.register(OP, _variant(tmp_path, "a", "x"), symbol=OP, pattern="p", bundle=None, accepted_by=" ")


@pytest.mark.parametrize("text", ["{not json", '{"format": 1, "ops": {"x": {"live": 3, "trail": [3], "versions": []}}}', "[]"])
def test_corrupt_registry_is_reported_and_left_untouched(reg: Registry, text: str) -> None:
    reg.root.mkdir(parents=True)
    reg.path.write_text(text)
    with pytest.raises(RegistryError, match="corrupt registry"):
        reg.live(OP)
    with pytest.raises(RegistryError, match="corrupt registry"):
        reg.status()
    assert reg.path.read_text() == text


def test_tampered_copy_is_refused(reg: Registry) -> None:
    live = reg.live(OP)
    Path(live.file).write_text(Path(live.file).read_text() + "\n# changed\n")
    with pytest.raises(RegistryError, match="does not match its sha256"):
        load_live(OP, reg)


def test_crash_mid_write_keeps_the_previous_registry(reg: Registry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    reg.live(OP)
    before = reg.path.read_bytes()

    def crash(src, dst):
        raise OSError("simulated crash before the rename")

    monkeypatch.setattr(registry_mod.os, "replace", crash)
    with pytest.raises(OSError, match="simulated"):
        reg.register(OP, _variant(tmp_path, "a", "v2"), symbol=OP, pattern="p", bundle=None, accepted_by="alice")
    monkeypatch.undo()
    assert reg.path.read_bytes() == before
    assert [v.version for v in reg.history(OP)] == [1]
    assert not list(reg.root.glob(".*.tmp")) and not list((reg.root / "objects").glob(".*.tmp"))


def _register_many(root: str, source: str, n: int, who: str) -> None:
    r = Registry(Path(root))
    for _ in range(n):
        r.register(OP, Path(source), symbol=OP, pattern="p", bundle=None, accepted_by=who)


def test_two_processes_never_lose_a_version(reg: Registry, tmp_path: Path) -> None:
    reg.live(OP)
    source = _variant(tmp_path, "a", "x")
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_register_many, args=(str(reg.root), str(source), 6, f"agent{i}")) for i in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    versions = reg.history(OP)
    assert [v.version for v in versions] == list(range(1, 14))
    assert sorted(v.accepted_by for v in versions[1:]) == ["agent0"] * 6 + ["agent1"] * 6


def test_default_root(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATTERNS_REGISTRY", str(tmp_path / "r"))
    assert registry_mod.default_root() == tmp_path / "r"
    monkeypatch.delenv("PATTERNS_REGISTRY")
    # this test runs from the source checkout (editable install)
    assert registry_mod.default_root() == Path(registry_mod.__file__).resolve().parent / "registry"


def _cli(*args: str, root: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATTERNS_REGISTRY": str(root), "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "patterns.cli", *args], capture_output=True, text=True, env=env, timeout=300)


def test_cli(reg: Registry, tmp_path: Path) -> None:
    v2 = reg.register(OP, _variant(tmp_path, "a", "v2"), symbol=OP, pattern="cache_eviction_hints", bundle=None, accepted_by="alice")
    done = _cli("serving", "promote", OP, str(v2.version), root=reg.root)
    assert done.returncode == 0, done.stderr
    assert reg.live(OP).version == 2
    done = _cli("serving", "status", root=reg.root)
    assert done.returncode == 0 and "cache_eviction_hints" in done.stdout and "kda_decode" in done.stdout
    done = _cli("serving", "rollback", OP, root=reg.root)
    assert done.returncode == 0 and reg.live(OP).version == 1
    for args, message in [
        (("serving", "promote", OP, "9"), f"error: {OP}: no version 9"),
        (("serving", "rollback", "nope"), "error: unknown op 'nope'"),
    ]:
        done = _cli(*args, root=reg.root)
        assert done.returncode == 2 and done.stderr.startswith(message) and len(done.stderr.strip().splitlines()) == 1
    reg.path.write_text("{oops")
    done = _cli("serving", "status", root=reg.root)
    assert done.returncode == 2 and "corrupt registry" in done.stderr and "Traceback" not in done.stderr
    assert reg.path.read_text() == "{oops"
