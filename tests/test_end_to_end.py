"""End to end: two bindings of ops interleaved in one engine process, and the review item judged by it.

`compare` runs here with the PyTorch references in both arms (the code path of
the GPU comparison, CPU times, no claim). The review tests accept a real
accepted H200 candidate of the agent's evidence (decode_attention,
gqa_head_grouping, with its GPU bundle) into a temporary registry and library,
then judge it against comparisons built here: the end-to-end speeds in them
are test fixtures, not measurements.
"""
from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from patterns.agent.endtoend import EndToEndError, judge, kernel_ratio, previous_version
from patterns.agent.review import ReviewError, ReviewStore
from patterns.cli import app
from patterns.core.library import LIBRARY_DIR
from patterns.core.records import (ArmMeasure, EngineOp, OpShare, ReviewItem, ServingComparison, ShapeComparison, StepProfile)
from patterns.serving.compare import Arm, against_versions, compare
from patterns.serving.engine import EngineError, bind_ops
from patterns.serving.model import OPS, ModelConfig
from patterns.serving.registry import Registry
from patterns.validation.bundle import read_bundle

CFG = ModelConfig(layers=("kda", "attn"), page=4)
ROOT = Path(__file__).resolve().parents[1]
AGENT = ROOT / "evidence/gpu/h200-agent/agent-home"
RUN = AGENT / "runs/decode_attention-20261202T174320041183"


SHAPES = [(1, 4), (3, 4), (2, 6)]


@pytest.fixture(scope="module")
def cpu_comparison(tmp_path_factory: pytest.TempPathFactory) -> tuple[ServingComparison, Path]:
    """Both arms the PyTorch references: the comparison's code path on the CPU."""
    traces = tmp_path_factory.mktemp("compare") / "traces"
    arms = Arm("a", bind_ops("reference")), Arm("b", bind_ops("reference"))
    return compare(CFG, "cpu", *arms, SHAPES, mode="eager", steps=3, rounds=2, ttft_runs=2, profile_n=2, trace_dir=traces), traces


def test_compare_interleaves_two_arms_and_profiles_each(cpu_comparison) -> None:
    result, traces = cpu_comparison
    shapes = SHAPES
    assert (result.device, result.mode, result.baseline, result.candidate) == ("cpu", "eager", "a", "b")
    assert sorted((s.batch, s.context) for s in result.shapes) == sorted(shapes)
    for s in result.shapes:
        assert not s.error and s.steps == 3 and len(s.ratios) == 2
        assert s.ci95[0] <= s.ratio <= s.ci95[1]
        for m in s.arms.values():
            assert m.tokens_per_s > 0 and 0 < m.itl_ms_p50 <= m.itl_ms_p99 and len(m.step_ms) == 2
        assert [p.arm for p in s.profiles] == ["a", "b"]
        for p in s.profiles:  # on a CPU: profiler ranges around each op; the rest of the step is glue
            assert p.source == "host" and [o.op for o in p.ops] == [*OPS, "glue", "idle"]
            assert all(o.ms_per_step > 0 for o in p.ops[:5]) and sum(o.ms_per_step for o in p.ops) == pytest.approx(p.step_ms)
    assert [(t.context, [len(v) for v in t.arms.values()]) for t in result.ttft] == [(6, [2, 2]), (4, [2, 2])]
    # the best shape's traces are kept, Chrome trace JSON with every op's ranges in them
    best = result.best()
    kept = sorted(p.name for p in traces.iterdir())
    assert kept == sorted(p.trace for p in best.profiles) and all(p.trace == "" for s in result.shapes if s is not best for p in s.profiles)
    events = json.loads((traces / kept[0]).read_text())["traceEvents"]
    assert {e["name"] for e in events if e.get("cat") == "user_annotation"} >= set(OPS)

    arms = Arm("a", bind_ops("reference")), Arm("b", bind_ops("reference"))
    late = compare(CFG, "cpu", *arms, [(1, 4)], mode="eager", steps=2, rounds=2, deadline=time.monotonic())
    assert [s.error for s in late.shapes] == ["not run: out of time"] and late.best() is None


def test_evidence_registers_the_agents_accepts_and_renders(cpu_comparison, tmp_path: Path) -> None:
    """The GPU script's registry is the agent session's: every accepted step, in order, the last one live."""
    from patterns.serving.evidence import register, render_folder

    reg = Registry(tmp_path / "registry")
    done = register(AGENT, reg)
    assert [(i.op, i.pattern_id, v) for i, v in done] == [
        ("decode_attention", "split_kv_lse_merge", 2), ("matmul", "autotune_configs_keys", 2), ("kda_decode", "split_underfilled_grid", 2),
        ("kda_decode", "cache_eviction_hints", 3), ("decode_attention", "gqa_head_grouping", 3), ("matmul", "autotune_configs_keys", 3),
    ]
    live = {op: reg.live(op) for op in OPS}
    assert {op: (v.version, v.pattern) for op, v in live.items()} == {
        "kda_decode": (3, "cache_eviction_hints"), "decode_attention": (3, "gqa_head_grouping"), "rmsnorm_gate": (1, ""), "matmul": (3, "autotune_configs_keys")}
    assert live["decode_attention"].sha256 == ReviewItem.model_validate_json((AGENT / "reviews/decode_attention-8ed8f903fe.json").read_bytes()).candidate_sha256

    result, traces = cpu_comparison
    results = tmp_path / "results"
    results.mkdir()
    (results / "compare.json").write_text(result.model_dump_json())
    for t in traces.iterdir():
        shutil.copy(t, results / t.name)
    readme = render_folder(results, tmp_path / "evidence", AGENT)
    text = readme.read_text()
    best = result.best()
    assert f"## The best shape: batch {best.batch}, context {best.context}, {best.ratio:.3f}x" in text
    assert "| decode_attention | v-" not in text and "split_kv_lse_merge 2.40x → gqa_head_grouping 3.47x" in text
    assert sorted(p.name for p in (tmp_path / "evidence").iterdir()) == sorted(["README.md", "compare.json", *(p.trace for p in best.profiles)])


def test_the_baseline_arm_pins_versions() -> None:
    assert against_versions("v1") == {op: 1 for op in OPS}
    assert against_versions("kda_decode=2, matmul=v1") == {"kda_decode": 2, "matmul": 1}
    with pytest.raises(EngineError, match="'kda_decode' is not OP=VERSION"):
        against_versions("kda_decode")


def test_compare_cli_on_the_cpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The GPU script's command, on the interpreter-sized preset: the registry's live ops (v1 here) against v1, eagerly."""
    monkeypatch.setenv("PATTERNS_REGISTRY", str(tmp_path / "registry"))
    out = tmp_path / "compare.json"
    args = ["serving", "compare", "--device", "cpu", "--batch", "1", "--context", "4", "--steps", "2", "--rounds", "2",
            "--ttft-runs", "1", "--profile-steps", "1", "--out", str(out), "--format", "json"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    saved = ServingComparison.model_validate_json(out.read_bytes())
    assert json.loads(result.stdout) == json.loads(saved.model_dump_json())
    assert (saved.baseline, saved.candidate, saved.mode) == ("v1", "live", "eager")
    assert [op.version for op in saved.arms["v1"]] == [op.version for op in saved.arms["live"]] == [1, 1, 1, 1]
    assert [(s.batch, s.context, len(s.ratios)) for s in saved.shapes] == [(1, 4, 2)]
    bad = CliRunner().invoke(app, ["serving", "compare", "--batch", "1,x"])
    assert bad.exit_code == 2 and bad.output.strip() == "error: --batch: '1,x' is not a comma-separated list of integers"
    bad = CliRunner().invoke(app, ["serving", "compare", "--against", "matmul"])
    assert bad.exit_code == 2 and "'matmul' is not OP=VERSION" in bad.output


# ---------------------------------------------------------------------- the review item


def _pending(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ReviewItem:
    """The agent's accepted gqa_head_grouping candidate, pending again in a temporary home, library and registry."""
    shutil.copytree(LIBRARY_DIR, tmp_path / "library", ignore=shutil.ignore_patterns("__pycache__"))
    for var, sub in (("PATTERNS_LIBRARY", "library"), ("PATTERNS_AGENT_HOME", "agent"), ("PATTERNS_REGISTRY", "registry")):
        monkeypatch.setenv(var, str(tmp_path / sub))
    target = tmp_path / "dec2" / "decode_attention.py"
    target.parent.mkdir()
    shutil.copy(ROOT / "evidence/gpu/h200-decode_attention/candidate-split-KV.py", target)  # what the agent's run started from
    item = ReviewItem.model_validate_json((AGENT / "reviews/decode_attention-8ed8f903fe.json").read_bytes())
    item = item.model_copy(update={
        "target": str(target), "candidate": str(RUN / "candidates/01-gqa_head_grouping.py"),
        "bundle": str(RUN / "evidence/decode_attention--01-gqa_head_grouping.json"),
        "status": "pending", "decided_by": "", "decided_at": "", "registry_version": None,
    })
    return ReviewStore().put(item)


@pytest.fixture
def accepted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[ReviewStore, ReviewItem]:
    item = _pending(tmp_path, monkeypatch)
    store = ReviewStore()
    done, m = store.accept(item.id, by="test")
    assert m.metric == "speedup" and done.registry_version == 2 and done.end_to_end is None
    return store, done


def _comparison(ratio: float, ci: tuple[float, float], share: float, op_ratio: float, device: str = "cuda") -> ServingComparison:
    """A comparison as `patterns serving compare --against decode_attention=1` writes it; its speeds are fixtures."""
    def ops(version: int) -> list[EngineOp]:
        return [EngineOp(op=op, impl="live", version=version if op == "decode_attention" else 1, file=f"{op}.py") for op in OPS]

    def profile(arm: str, attention_ms: float) -> StepProfile:
        return StepProfile(arm=arm, source="device", step_ms=10.0, steps=4, ops=[OpShare(op="decode_attention", ms_per_step=attention_ms, share=attention_ms / 10)])

    arm = ArmMeasure(tokens_per_s=1.0, itl_ms_p50=1.0, itl_ms_p99=1.0, step_ms=[1.0])
    shape = ShapeComparison(batch=32, context=32768, steps=16, arms={"decode_attention=1": arm, "live": arm}, ratio=ratio, ci95=list(ci),
                            ratios=[ratio], profiles=[profile("decode_attention=1", 10 * share), profile("live", 10 * share / op_ratio)])
    return ServingComparison(device=device, mode="graph", model={}, baseline="decode_attention=1", candidate="live",
                             arms={"decode_attention=1": ops(1), "live": ops(2)}, shapes=[shape], environment={"gpu": "NVIDIA H200"})


def test_a_kernel_win_that_does_not_show_end_to_end_is_flagged(accepted, tmp_path: Path) -> None:
    store, item = accepted
    bundle = read_bundle(Path(item.bundle))
    kernel = kernel_ratio(bundle)
    assert kernel is not None and kernel > 3  # the gate measured 3.47x geomean on the H200
    assert previous_version(store.registry, item) == 1

    slower = judge(item, bundle, _comparison(0.95, (0.94, 0.96), share=0.02, op_ratio=1.25), tmp_path / "c.json")
    assert (slower.verdict, slower.previous_version, slower.new_version, slower.shape) == ("slower", 1, 2, {"batch": 32, "context": 32768})
    assert slower.flag == ("kernel 3.47x, end to end 0.950x [0.940, 0.960] at batch 32, context 32768: "
                           "decode_attention is 2.0% of the step and ran 1.25x in the engine")
    flat = judge(item, bundle, _comparison(1.004, (0.998, 1.009), share=0.02, op_ratio=1.25), tmp_path / "c.json")
    assert flat.verdict == "within-noise" and flat.flag.startswith("kernel 3.47x, end to end 1.004x")
    shows = judge(item, bundle, _comparison(2.9, (2.85, 2.95), share=0.8, op_ratio=4.2), tmp_path / "c.json")
    assert (shows.verdict, shows.flag, round(shows.op_share, 3), round(shows.op_ratio, 3)) == ("shows", "", 0.8, 4.2)
    with pytest.raises(EndToEndError, match="measures no speed"):
        judge(item, bundle, _comparison(1.2, (1.1, 1.3), 0.5, 2.0, device="cpu"), tmp_path / "c.json")

    stored = store.record_end_to_end(item.id, slower)
    assert store.get(item.id).end_to_end == slower == stored.end_to_end
    out = CliRunner().invoke(app, ["review", "show", item.id, "--no-diff"], env={"COLUMNS": "200"})
    assert out.exit_code == 0, out.output
    assert "end to end: kernel 3.47x, tokens/s 0.950x [0.940, 0.960] at batch 32, context 32768 (slower; v1 -> v2 on NVIDIA H200)" in out.output
    assert "flagged: kernel 3.47x, end to end 0.950x" in out.output
    with pytest.raises(ReviewError, match="end to end judges v3"):
        store.record_end_to_end(item.id, slower.model_copy(update={"new_version": 3}))


@pytest.mark.skipif(torch.cuda.is_available(), reason="on a GPU the accept would run the comparison")
def test_accept_on_a_cpu_measures_nothing_end_to_end(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    item = _pending(tmp_path, monkeypatch)
    out = CliRunner().invoke(app, ["review", "accept", item.id, "--by", "test"])
    assert out.exit_code == 0, out.output
    assert "decode_attention v2 is live" in out.output and "end to end: not measured (it needs a GPU bundle and a GPU)" in out.output
    assert ReviewStore().get(item.id).end_to_end is None and Registry().live("decode_attention").version == 2


def test_a_step_that_cannot_be_captured_is_measured_eagerly(monkeypatch: pytest.MonkeyPatch) -> None:
    from patterns.serving import compare as compare_mod
    from patterns.serving.graph import CaptureError, Decoder

    attempts = []

    def prepare(self) -> None:  # the first capture breaks, as an op that syncs with the host would break it
        attempts.append(self)
        if len(attempts) == 1:
            raise CaptureError("the decode step cannot be captured in a CUDA graph (in op decode_attention): RuntimeError: sync")

    monkeypatch.setattr(Decoder, "prepare", prepare)
    arms = Arm("a", bind_ops("reference")), Arm("b", bind_ops("reference"))
    result = compare_mod.compare(CFG, "cpu", *arms, [(2, 4)], mode="graph", steps=2, rounds=2, ttft_runs=1, profile_n=1)
    (shape,) = result.shapes
    assert not shape.error and len(shape.ratios) == 2
    assert shape.note == "measured eagerly: the decode step cannot be captured in a CUDA graph (in op decode_attention): RuntimeError: sync"
