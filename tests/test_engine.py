"""The serving engine: reference and live ops agree, and the registry decides what runs.

Live ops are the registry's Triton kernels through the interpreter, on a
two-layer model (one KDA layer, one attention layer) so that a run takes seconds.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from patterns.cli import app
from patterns.serving.engine import Engine, EngineError
from patterns.serving.model import OPS, ModelConfig
from patterns.serving.registry import Registry
from patterns.core.ops import kernels_dir

CFG = ModelConfig(layers=("kda", "attn"), page=4)  # a page of 4: a 6-token sequence spans two scattered pages
BATCH, PROMPT, NEW = 2, 3, 3


@pytest.fixture
def reg(tmp_path: Path) -> Registry:
    return Registry(tmp_path / "registry")


def _generate(engine: Engine):
    with torch.inference_mode():
        return engine.run(engine.prompts(BATCH, PROMPT), NEW)


def test_live_ops_agree_with_the_references(reg: Registry) -> None:
    ref = Engine(CFG, impl="reference", device="cpu")
    live = Engine(CFG, impl="live", device="cpu", registry=reg, verify=True)
    ref_tokens, _, ref_logits = _generate(ref)
    live_tokens, stamps, live_logits = _generate(live)
    assert torch.equal(live_tokens, ref_tokens)
    torch.testing.assert_close(live_logits, ref_logits, atol=1e-4, rtol=1e-4)
    assert len(stamps) == NEW and stamps == sorted(stamps)
    steps = PROMPT + NEW - 1
    calls = {"kda_decode": steps, "decode_attention": steps, "rmsnorm_gate": 3 * steps, "matmul": 9 * steps}  # per layer: mixer in/out, MLP up/down; logits
    for name, op in live.ops.items():
        r = op.record
        assert (r.impl, r.version, r.pattern, r.calls) == ("live", 1, "", calls[name])
        assert r.within_tolerance is True, r.mismatch
        assert r.max_abs_err is not None and r.max_abs_err < 1e-4
        assert ref.ops[name].record.calls == calls[name]


def test_the_registry_decides_which_version_runs(reg: Registry, tmp_path: Path) -> None:
    op = "rmsnorm_gate"
    source = (kernels_dir() / op / "baseline.py").read_text()
    unweighted = source.replace("b_y = b_x * b_rstd * b_w * b_g", "b_y = b_x * b_rstd * b_g")  # drops the norm's weight
    assert unweighted != source
    variant = tmp_path / "unweighted.py"
    variant.write_text(unweighted)
    v2 = reg.register(op, variant, symbol=op, pattern="test-variant", bundle=None, accepted_by="test")
    reg.promote(op, v2.version)

    swapped = Engine(CFG, impl="live", device="cpu", registry=reg, verify=True)
    report = swapped.generate(swapped.prompts(BATCH, PROMPT), NEW, warmup=False)
    ran = {r.op: r for r in report.ops}
    assert (ran[op].version, ran[op].pattern, ran[op].sha256) == (2, "test-variant", v2.sha256)
    assert ran[op].within_tolerance is False and ran[op].mismatch.startswith("call 1: y[")
    assert all(ran[o].version == 1 and ran[o].within_tolerance for o in OPS if o != op)

    reg.rollback(op)
    restored = Engine(CFG, impl="live", device="cpu", registry=reg, verify=True)
    report = restored.generate(restored.prompts(BATCH, PROMPT), NEW, warmup=False)
    assert all(r.version == 1 and r.within_tolerance for r in report.ops)


def test_report_metrics(reg: Registry) -> None:
    engine = Engine(CFG, impl="reference", device="cpu")
    report = engine.generate(engine.prompts(BATCH, PROMPT), NEW)
    assert (report.impl, report.device, report.batch, report.prompt_len, report.new_tokens) == ("reference", "cpu", BATCH, PROMPT, NEW)
    assert len(report.tokens) == BATCH and all(len(t) == NEW and all(0 <= x < CFG.vocab for x in t) for t in report.tokens)
    assert 0 < report.itl_ms_median <= report.itl_ms_p90
    assert report.ttft_ms > 0 and report.tokens_per_s > 0
    assert {r.op: r.file for r in report.ops} == {op: f"kernels/{op}/naive.py" for op in OPS}


def test_paged_cache_scatters_pages(reg: Registry) -> None:
    engine = Engine(CFG, impl="reference", device="cpu")
    cache = engine.model.new_cache(BATCH)
    for _ in range(CFG.page + 1):
        cache.append_slot()
    pages = cache.page_table[:, :2]
    assert pages.unique().numel() == 2 * BATCH and bool((pages > 0).all())  # page 0 is padding
    assert cache.seq_lens.tolist() == [CFG.page + 1] * BATCH


def test_bad_input() -> None:
    engine = Engine(CFG, impl="reference", device="cpu")
    with pytest.raises(EngineError, match="at least 2"):
        engine.generate(engine.prompts(1, 2), 1)
    with pytest.raises(EngineError, match="exceed the model's max_len"):
        engine.generate(engine.prompts(1, CFG.max_len), 2)
    runner = CliRunner()
    for args, message in (
        (["--impl", "fast"], "error: unknown impl 'fast' (auto, reference or live)"),
        (["--model", "huge"], "error: unknown model preset 'huge' (tiny, small)"),
        (["--format", "xml"], "error: unknown format 'xml' (table or json)"),
        (["--impl", "reference", "--verify"], "error: --verify compares live ops with their references: it needs --impl live (or auto on a GPU)"),
    ):
        result = runner.invoke(app, ["serving", "engine", *args])
        assert result.exit_code == 2 and result.output.strip() == message


def test_cli_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATTERNS_REGISTRY", str(tmp_path / "registry"))
    result = CliRunner().invoke(app, ["serving", "engine", "--batch", "2", "--prompt-len", "2", "--steps", "2", "--impl", "reference", "--format", "json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["impl"] == "reference" and report["batch"] == 2 and len(report["tokens"]) == 2
    assert [op["op"] for op in report["ops"]] == list(OPS)


def test_reference_path_of_the_gpu_preset_keeps_the_cache_dtype() -> None:
    """The `small` preset's bf16 paged pool takes the reference projection's fp32 K/V (a crash on the H200 once)."""
    from patterns.serving.model import PRESETS

    engine = Engine(PRESETS["small"], impl="reference", device="cpu")
    with torch.inference_mode():
        tokens, _, logits = engine.run(engine.prompts(1, 2), 2)
    assert tokens.shape == (1, 2) and torch.isfinite(logits).all()
