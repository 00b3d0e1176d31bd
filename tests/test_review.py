"""Review: accept merges target + registry + pattern evidence in one step (crash-safe), reject changes nothing.

Each test runs the agent on a copy of kernels/rmsnorm_gate/ (one rewrite
passes: software pipelining, exact) with a copy of the library, a temporary
registry and a temporary agent home, so nothing of the checkout changes.
"""
from __future__ import annotations

import difflib
import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from patterns.agent import review as review_mod
from patterns.agent.journal import Journal
from patterns.agent.loop import AgentConfig, run_agent
from patterns.agent.review import ReviewError, ReviewStore
from patterns.core.library import LIBRARY_DIR, load_pattern
from patterns.serving.registry import Registry, RegistryError, load_live
from patterns.core.records import ReviewItem
from patterns.core.schema import Safety
from patterns.validation.bundle import read_bundle
from patterns.core import user_evidence
from patterns.core.ops import kernels_dir

OP = "rmsnorm_gate"
PATTERN = "software_pipelining_num_stages"


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    lib = tmp_path / "library"
    shutil.copytree(LIBRARY_DIR, lib, ignore=shutil.ignore_patterns("__pycache__"))
    folder = tmp_path / "kernels" / OP
    shutil.copytree(kernels_dir() / OP, folder, ignore=shutil.ignore_patterns("__pycache__"))
    paths = {"home": tmp_path / "agent", "registry": tmp_path / "registry", "library": lib, "target": folder / "baseline.py"}
    monkeypatch.setenv("PATTERNS_AGENT_HOME", str(paths["home"]))
    monkeypatch.setenv("PATTERNS_REGISTRY", str(paths["registry"]))
    monkeypatch.setenv("PATTERNS_LIBRARY", str(lib))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    for var in ("PATTERNS_LLM_BASE_URL", "PATTERNS_LLM_MODEL", "PATTERNS_LLM_API_KEY", "OPENAI_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    return paths


def _run(env: dict[str, Path], **kw):
    return run_agent(AgentConfig(op=OP, target=env["target"], shapes=1, device="cpu", **kw), home=env["home"])


def _item(env: dict[str, Path]) -> ReviewItem:
    result = _run(env)
    items = [i for i in result.reviews if i.pattern_id == PATTERN]
    assert items, [(a.pattern_id, a.outcome, a.reason) for a in result.attempts]
    return items[0]


def _yaml(env: dict[str, Path]) -> Path:
    return env["library"] / PATTERN / "pattern.yaml"


def _snapshot(env: dict[str, Path]) -> dict[str, bytes]:
    files = [env["target"], _yaml(env), *sorted(env["registry"].rglob("*")), *sorted((env["home"] / "evidence").rglob("*"))]
    return {str(p): p.read_bytes() for p in files if p.is_file() and p.suffix != ".lock"}  # lock files hold no state


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_accept_merges_promotes_and_records_the_measurement(env: dict[str, Path]) -> None:
    item = _item(env)
    old_yaml = _yaml(env).read_text()
    store = ReviewStore()
    accepted, m = store.accept(item.id, by="alice", note="looks right")
    assert (accepted.status, accepted.decided_by, accepted.registry_version, accepted.note) == ("accepted", "alice", 2, "looks right")
    assert store.get(item.id) == accepted

    # the target now holds the candidate
    assert env["target"].read_bytes() == Path(item.candidate).read_bytes()
    # the registry: a new version, live, with what admitted it
    reg = Registry()
    live = reg.live(OP)
    assert (live.version, live.sha256, live.pattern, live.accepted_by) == (2, item.candidate_sha256, PATTERN, "alice")
    assert live.bundle == str(Path(item.bundle).resolve())
    assert Path(load_live(OP, reg).__code__.co_filename).read_bytes() == env["target"].read_bytes()
    # ... which is what the serving engine now runs
    from patterns.serving.engine import bind_ops

    record = bind_ops("live", reg)[OP].record
    assert (record.version, record.pattern, record.sha256) == (2, PATTERN, item.candidate_sha256)

    # the target is a copy outside the project's kernels/: the measurement goes to the user's
    # evidence store (beside the agent home here), the library's pattern.yaml stays as it was
    assert _yaml(env).read_text() == old_yaml
    (rec,) = user_evidence.records(PATTERN)
    assert (rec.measurement, rec.item, rec.target, rec.op) == (m, item.id, str(env["target"]), OP)
    assert (env["home"] / "evidence" / f"{PATTERN}.json").is_file()
    assert (m.metric, m.ratio, m.hardware) == ("max-rel-err-vs-baseline", 1.0, "cpu, Triton interpreter")  # exact: bit-identical
    assert m.source == item.bundle and "dtype=float32/bfloat16" in m.shapes

    with pytest.raises(ReviewError, match="already accepted by alice"):
        store.accept(item.id, by="bob")
    with pytest.raises(ReviewError, match="already accepted"):
        store.reject(item.id, by="bob")
    # rolling back in the registry serves the old code again; the merge itself stays
    assert reg.rollback(OP).version == 1
    assert bind_ops("live", reg)[OP].record.version == 1


def test_accept_of_a_file_of_the_project_kernels_splices_the_library(env: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    item = _item(env)
    old_yaml = _yaml(env).read_text()
    # the target stands for kernels/<op>/baseline.py of the checkout (the copy keeps the checkout clean)
    monkeypatch.setattr(ReviewStore, "in_library", staticmethod(lambda it: it.id == item.id))
    _, m = ReviewStore().accept(item.id, by="alice")
    assert load_pattern(_yaml(env)).evidence.measured == [m] and user_evidence.records(PATTERN) == []
    changed = [ln for ln in difflib.unified_diff(old_yaml.splitlines(), _yaml(env).read_text().splitlines(), lineterm="", n=0)
               if ln.startswith(("-", "+")) and not ln.startswith(("---", "+++"))]
    assert changed[0] == "-  measured: []" and all(ln.startswith("+ ") for ln in changed[1:])


def test_reject_changes_nothing(env: dict[str, Path]) -> None:
    item = _item(env)
    Registry().live(OP)  # seeded, so its files are part of the snapshot
    before = _snapshot(env)
    rejected = ReviewStore().reject(item.id, by="carol", note="not now")
    assert (rejected.status, rejected.decided_by, rejected.note) == ("rejected", "carol", "not now")
    assert _snapshot(env) == before
    assert not list((env["home"] / "reviews").glob("*.accept.json"))
    with pytest.raises(ReviewError, match="already rejected"):
        ReviewStore().accept(item.id, by="carol")


def test_a_changed_target_is_never_overwritten(env: dict[str, Path]) -> None:
    item = _item(env)
    env["target"].write_text(env["target"].read_text() + "\n# edited by hand\n")
    before = _snapshot(env)
    with pytest.raises(ReviewError, match="changed since the candidate was made"):
        ReviewStore().accept(item.id, by="dan")
    assert _snapshot(env) == before and ReviewStore().get(item.id).status == "pending"


def test_a_corrupt_registry_stops_the_accept_before_anything_changes(env: dict[str, Path]) -> None:
    item = _item(env)
    env["registry"].mkdir(parents=True, exist_ok=True)
    (env["registry"] / "registry.json").write_text("{torn")
    before = _snapshot(env)
    with pytest.raises(RegistryError, match="corrupt registry"):
        ReviewStore().accept(item.id, by="erin")
    assert _snapshot(env) == before
    assert not list((env["home"] / "reviews").glob("*.accept.json")) and ReviewStore().get(item.id).status == "pending"


def test_a_crash_before_the_commit_point_changes_nothing(env: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    item = _item(env)
    Registry().live(OP)
    before = _snapshot(env)

    def crash(*_a, **_k):
        raise OSError("power cut while writing the intent")

    with monkeypatch.context() as patch:
        patch.setattr(ReviewStore, "_write_intent", crash)
        with pytest.raises(OSError, match="power cut"):
            ReviewStore().accept(item.id, by="fay")
    assert _snapshot(env) == before
    assert ReviewStore().recover() == [] and ReviewStore().get(item.id).status == "pending"


def _crash_at(point: str, env: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    from patterns.core import files as files_mod

    if point == "register":
        monkeypatch.setattr(Registry, "register", lambda *a, **k: (_ for _ in ()).throw(OSError("crash in register")))
    elif point == "after-register":  # registered, but the intent never learnt the version
        real = ReviewStore._write_intent

        def write(self, intent):
            if intent.registry_version is not None:
                raise OSError("crash after register")
            real(self, intent)

        monkeypatch.setattr(ReviewStore, "_write_intent", write)
    elif point == "target":
        real_write = files_mod.write_atomic

        def write_bytes(path, data, **kw):
            if Path(path) == env["target"]:
                raise OSError("crash writing the target")
            real_write(path, data, **kw)

        monkeypatch.setattr(files_mod, "write_atomic", write_bytes)
    elif point == "promote":  # target and evidence written, not yet live
        monkeypatch.setattr(Registry, "promote", lambda *a, **k: (_ for _ in ()).throw(OSError("crash in promote")))
    elif point == "mark":  # everything done but the item's own status
        monkeypatch.setattr(ReviewStore, "_write", lambda *a, **k: (_ for _ in ()).throw(OSError("crash marking the item")))


@pytest.mark.parametrize("point", ["register", "after-register", "target", "promote", "mark"])
def test_a_crash_after_the_commit_point_is_finished_by_recovery(point: str, env: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    item = _item(env)
    with monkeypatch.context() as patch:
        _crash_at(point, env, patch)
        with pytest.raises(OSError, match="crash"):
            ReviewStore().accept(item.id, by="gus")
    assert list((env["home"] / "reviews").glob("*.accept.json"))  # the intent survived the crash
    assert ReviewStore().get(item.id).status == "pending"

    assert ReviewStore().recover() == [item.id]
    done = ReviewStore().get(item.id)
    assert (done.status, done.decided_by, done.registry_version) == ("accepted", "gus", 2)
    reg = Registry()
    assert [v.version for v in reg.history(OP)] == [1, 2]  # registered once, whatever the crash point
    assert reg.live(OP).sha256 == item.candidate_sha256
    assert _sha(env["target"]) == item.candidate_sha256
    assert len(user_evidence.records(PATTERN)) == 1  # recorded once
    assert load_pattern(_yaml(env)).evidence.measured == []  # and never in the library: the target is outside kernels/
    assert not list((env["home"] / "reviews").glob("*.accept.json"))
    assert ReviewStore().recover() == []


def test_auto_merge_exact_merges_only_exact_rewrites(env: dict[str, Path]) -> None:
    result = _run(env, auto_merge_exact=True)
    assert result.merged is not None and result.finish.startswith(f"merged {result.merged}")
    item = ReviewStore().get(result.merged)
    # the first exact rewrite to pass: static_range_unroll now plans ahead of software pipelining, which
    # rightly so: rmsnorm_gate's loops run cdiv(D, BD) = 1 trip at D = 128, nothing for num_stages to overlap
    assert (item.pattern_id, item.safety.value, item.decided_by) == ("static_range_unroll", "exact", review_mod.AUTO)
    assert Registry().live(OP).version == 2 and _sha(env["target"]) == item.candidate_sha256
    kinds = [e.kind for e in Journal(result.run_dir / "journal.jsonl").events]
    assert kinds[-2:] == ["merge", "finish"]
    # the rule itself: numerics- and concurrency-changing items, model patches, and an "exact" rewrite
    # whose outputs changed by a bit always wait for a person
    bundle = read_bundle(Path(item.bundle))
    assert review_mod.auto_merge_refusal(item, bundle) == ""
    for safety, origin in [("numerics-changing", "rewrite"), ("concurrency-changing", "rewrite"), ("exact", "llm-patch")]:
        assert review_mod.auto_merge_refusal(item.model_copy(update={"safety": Safety(safety), "origin": origin}), bundle)
    drifted = bundle.model_copy(deep=True)
    next(c for c in drifted.checks if c.name == "correctness").details["bit_identical_to_baseline"] = False
    assert "not bit-identical" in review_mod.auto_merge_refusal(item, drifted)


def test_auto_merge_leaves_a_numerics_rewrite_for_a_person(env: dict[str, Path], tmp_path: Path) -> None:
    folder = tmp_path / "kernels" / "cp_state_merge"
    shutil.copytree(kernels_dir() / "cp_state_merge", folder, ignore=shutil.ignore_patterns("__pycache__"))
    before = (folder / "baseline.py").read_bytes()
    result = run_agent(AgentConfig(op="cp_state_merge", target=folder / "baseline.py", shapes=1, device="cpu", max_steps=1, auto_merge_exact=True),
                       home=env["home"])
    (item,) = result.reviews
    assert (item.pattern_id, item.safety.value, item.status) == ("tf32x3_dot_precision", "numerics-changing", "pending")
    assert result.merged is None and (folder / "baseline.py").read_bytes() == before
    with pytest.raises(ReviewError, match="not merged automatically: numerics-changing"):
        ReviewStore().accept(item.id, by="bot", automatic=True)
    # a person may
    accepted, m = ReviewStore().accept(item.id, by="hana")
    assert accepted.status == "accepted" and m.metric == "max-rel-err-vs-baseline" and m.ratio > 0


def test_interactive_review_at_the_prompt(env: dict[str, Path]) -> None:
    cli_env = {**os.environ, "COLUMNS": "200"}
    cmd = [sys.executable, "-m", "patterns.cli", "agent", str(env["target"]), "--shapes", "1", "--device", "cpu", "--review", "interactive"]
    done = subprocess.run(cmd, input="accept\n", env=cli_env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "accept, reject, or later" in done.stdout and "+++ b/baseline.py" in done.stdout
    (item,) = ReviewStore().list()
    assert item.status == "accepted" and Registry().live(OP).version == 2
    assert "merged" in done.stdout


def test_review_cli(env: dict[str, Path], capsys: pytest.CaptureFixture) -> None:
    from patterns.cli import app, main

    item = _item(env)
    runner = CliRunner()
    out = runner.invoke(app, ["review", "list"], env={"COLUMNS": "200"})
    assert out.exit_code == 0 and item.id in out.stdout and PATTERN in out.stdout
    out = runner.invoke(app, ["review", "show", item.id], env={"COLUMNS": "200"})
    assert out.exit_code == 0
    for text in ("hypothesis", item.hypothesis.text[:40], "feedback trail", "correctness", "+++ b/baseline.py"):
        assert text in out.stdout, text
    out = runner.invoke(app, ["review", "reject", item.id, "--by", "ivy", "--note", "later"])
    assert out.exit_code == 0 and f"rejected {item.id}" in out.stdout
    out = runner.invoke(app, ["review", "list", "--status", "rejected"], env={"COLUMNS": "200"})
    assert item.id in out.stdout
    for args, message in [
        (("review", "accept", item.id), f"error: {item.id}: already rejected by ivy"),
        (("review", "accept", "rmsnorm_gate-ffffffffff"), "error: no review item 'rmsnorm_gate-ffffffffff'"),
        (("review", "list", "--status", "maybe"), "error: --status: 'maybe'"),
    ]:
        with pytest.raises(SystemExit) as exc:
            main(list(args))
        err = capsys.readouterr().err
        assert exc.value.code == 2 and err.startswith(message) and len(err.strip().splitlines()) == 1, err
    # a corrupt item file is named, not guessed around
    ReviewStore().path(item.id).write_text("{")
    with pytest.raises(SystemExit) as exc:
        main(["review", "show", item.id])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "corrupt review item" in err and "Traceback" not in err


def test_measurements_are_spliced_into_pattern_yaml_keeping_every_other_line() -> None:
    from patterns.distill.errors import DistillError
    from patterns.distill.merge import append_measured
    from patterns.core.schema import Measurement

    # a pattern with nothing measured yet (accepted results fill others' lists over time)
    text = next(t for t in (f.read_text() for f in sorted(LIBRARY_DIR.glob("*/pattern.yaml"))) if "  measured: []\n" in t)
    m1 = Measurement(hardware="NVIDIA H200", shapes="N=1/8/64/512, K=128", baseline="kernels/cp_state_merge/baseline.py",
                     candidate="tf32x3_dot_precision(precision=tf32x3)", ratio=0.55, metric="speedup", command="patterns agent cp_state_merge", source="ev.json")
    m2 = m1.model_copy(update={"ratio": 1.2, "shapes": "odd: 'quoted' # not a comment"})
    once = append_measured(text, [m1])
    twice = append_measured(once, [m2])
    import yaml

    from patterns.core.schema import Pattern

    assert Pattern.model_validate(yaml.safe_load(twice)).evidence.measured == [m1, m2]
    kept = [ln for ln in text.splitlines() if ln != "  measured: []"]
    assert [ln for ln in twice.splitlines() if ln in kept] == kept  # every other line, in order
    without = text.replace("  measured: []\n", "")
    assert Pattern.model_validate(yaml.safe_load(append_measured(without, [m1]))).evidence.measured == [m1]
    with pytest.raises(DistillError, match="evidence.measured: cannot merge"):
        append_measured(text.replace("evidence:\n", "evidence: {}\nxevidence:\n", 1), [m1], "p.yaml")


def test_a_gpu_bundle_records_the_speed_ratio() -> None:
    """With a performance layer (a real H200 bundle of the kda_decode baseline) the measurement is the gate's speed ratio."""
    from patterns.core.records import Hypothesis

    path = Path(__file__).resolve().parents[1] / "evidence" / "gpu" / "h200-baselines" / "kda_decode--baseline.json"
    bundle = read_bundle(path)
    overall = next(c for c in bundle.checks if c.name == "speed overall")
    item = ReviewItem(
        id="kda_decode-0123456789", op="kda_decode", run="r", target="kernels/kda_decode/baseline.py", target_sha256="0" * 64,
        symbol="kda_decode", pattern_id="fuse_v_tiles", params={"num_warps": 8}, safety=Safety.numerics, candidate="c.py",
        candidate_sha256="1" * 64, diff="", bundle=str(path), device="cuda", grid="all 4 shapes",
        hypothesis=Hypothesis(pattern_id="fuse_v_tiles", text="t", prediction="p"), created="2026-01-01T00:00:00+00:00",
    )
    m = review_mod.measurement(item, bundle)
    assert (m.metric, m.hardware, m.ratio) == ("speedup", "NVIDIA H200", round(overall.details["geomean_ratio"], 4))
    assert m.shapes.startswith("B=1/8/32/128/512, T=1, H=32") and m.candidate == "fuse_v_tiles(num_warps=8)"
