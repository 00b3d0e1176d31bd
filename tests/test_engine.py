"""The serving engine: reference and live ops agree, the graph path gives the eager path's tokens, the registry decides what runs.

Live ops are the registry's Triton kernels through the interpreter, on a
two-layer model (one KDA layer, one attention layer) so that a run takes seconds.
On a CPU the graph path keeps its buckets and static buffers but captures
nothing; the capture itself is tested where a GPU is present.
"""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from patterns.cli import app
from patterns.serving.engine import Engine, EngineError, bind_ops
from patterns.serving.graph import Decoder, bucket
from patterns.serving.model import OPS, ModelConfig
from patterns.serving.profile import Profile, op_of, shares, triton_kernels
from patterns.serving.registry import Registry
from patterns.core.ops import kernels_dir

CFG = ModelConfig(layers=("kda", "attn"), page=4)  # a page of 4: a 6-token sequence spans two scattered pages
BATCH, PROMPT, NEW = 2, 3, 3
AGENT_RUNS = Path(__file__).resolve().parents[1] / "evidence/gpu/h200-agent/agent-home/runs"


@pytest.fixture
def reg(tmp_path: Path) -> Registry:
    return Registry(tmp_path / "registry")


def _generate(engine: Engine, batch: int = BATCH):
    with torch.inference_mode():
        return engine.run(engine.prompts(batch, PROMPT), NEW)


def test_live_ops_agree_with_the_references(reg: Registry) -> None:
    ref = Engine(CFG, impl="reference", device="cpu")
    live = Engine(CFG, impl="live", device="cpu", registry=reg, verify=True)
    assert live.mode == "eager"
    ref_tokens, _, ref_logits = _generate(ref)
    live_tokens, stamps, live_logits = _generate(live)
    assert torch.equal(live_tokens, ref_tokens)
    assert len(set(live_tokens.flatten().tolist())) > 2  # the untied model's tokens move: feeding back a stale one would show
    torch.testing.assert_close(live_logits, ref_logits, atol=1e-4, rtol=1e-4)
    assert len(stamps) == NEW and stamps == sorted(stamps)
    # the prefill and each of the NEW - 1 decode steps: per layer mixer in/out, MLP up/down, then the logits;
    # the prefill's attention is PyTorch's (no decode_attention call)
    calls = {"kda_decode": NEW, "decode_attention": NEW - 1, "rmsnorm_gate": 3 * NEW, "matmul": 9 * NEW}
    for name, op in live.ops.items():
        r = op.record
        assert (r.impl, r.version, r.pattern, r.calls) == ("live", 1, "", calls[name])
        assert r.within_tolerance is True, r.mismatch
        assert r.max_abs_err is not None and r.max_abs_err < 1e-4
        assert ref.ops[name].record.calls == calls[name]


def test_graph_path_gives_the_eager_tokens(reg: Registry) -> None:
    """Three sequences in the graph path's bucket of four (a padding row) decode what the eager path decodes at three."""
    eager = Engine(CFG, impl="live", device="cpu", registry=reg, mode="eager")
    graph = Engine(CFG, impl="live", device="cpu", registry=reg, mode="graph", model=eager.model)
    e_tokens, _, e_logits = _generate(eager, 3)
    g_tokens, _, g_logits = _generate(graph, 3)
    assert graph.decoder(3).tokens.shape == (4,) and graph.decoder(3).cache.batch == 4
    assert torch.equal(g_tokens, e_tokens)
    torch.testing.assert_close(g_logits, e_logits, atol=1e-5, rtol=1e-5)
    assert {n: op.record.calls for n, op in graph.ops.items()} == {n: op.record.calls for n, op in eager.ops.items()}
    # the bucket's cache is kept and reused: a second generation starts from an empty cache again
    again, _, _ = _generate(graph, 3)
    assert torch.equal(again, e_tokens)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_graph_capture_on_a_gpu(reg: Registry) -> None:
    eager = Engine(CFG, impl="live", device="cuda", registry=reg, mode="eager")
    graph = Engine(CFG, impl="live", device="cuda", registry=reg, mode="graph", model=eager.model)
    report_e = eager.generate(eager.prompts(4, PROMPT), 8)
    report_g = graph.generate(graph.prompts(4, PROMPT), 8)
    assert graph.decoder(4).graph is not None
    assert report_g.tokens == report_e.tokens


def test_prefill_is_the_prompt_token_by_token() -> None:
    """All prompt tokens at once give the logits, KDA states and KV pages of feeding them one decode step at a time."""
    engine = Engine(CFG, impl="reference", device="cpu")
    model, ops = engine.model, engine.ops
    prompts = engine.prompts(BATCH, 6)
    with torch.inference_mode():
        whole = model.new_cache(BATCH)
        logits = model.prefill(prompts, whole, ops)
        steps = model.new_cache(BATCH)
        steps.reserve(6)
        for t in range(6):
            stepped = model.step(prompts[:, t], steps, ops)
            steps.advance(1)
    torch.testing.assert_close(logits, stepped, atol=1e-4, rtol=1e-4)
    assert whole.seq_lens.tolist() == steps.seq_lens.tolist() == [6, 6] and whole.length == steps.length == 6
    for i in whole.kda:
        torch.testing.assert_close(whole.kda[i], steps.kda[i], atol=1e-5, rtol=1e-5)
    for i in whole.k:  # the same tokens' keys, each cache in pages of its own order
        k_whole = whole.k[i][whole.page_table[:, :2].long()].flatten(1, 2)[:, :6]
        k_steps = steps.k[i][steps.page_table[:, :2].long()].flatten(1, 2)[:, :6]
        torch.testing.assert_close(k_whole, k_steps, atol=1e-5, rtol=1e-5)


def test_cache_snapshot_reset_and_fill() -> None:
    engine = Engine(CFG, impl="reference", device="cpu")
    model, ops = engine.model, engine.ops
    src = model.new_cache(1)
    free = len(src.free)
    with torch.inference_mode():
        logits = model.prefill(engine.prompts(1, 5), src, ops)
        token = logits.argmax(-1)
        dec = Decoder(model, src, ops, capture=False)
        dec.tokens.copy_(token)
        src.reserve(3)
        snap = src.snapshot()
        runs = []
        for _ in range(2):  # a restored cache decodes the same tokens again
            src.restore(snap)
            dec.tokens.copy_(token)
            out = []
            for _ in range(3):
                dec.step()
                out.append(int(dec.tokens))
            runs.append(out)
        assert runs[0] == runs[1] and src.length == 8 and src.seq_lens.tolist() == [8]

        batch = model.new_cache(3, max_len=16)
        src.restore(snap)
        batch.fill_from(src)
        pages = batch.page_table[:, :batch.pages]
        assert pages.unique().numel() == pages.numel() and bool((pages > 0).all())  # every row in pages of its own
        for i in batch.k:
            rows = batch.k[i][pages.long()].flatten(1, 2)[:, :5]
            torch.testing.assert_close(rows, src.k[i][src.page_table[:1, :2].long()].flatten(1, 2)[:, :5].expand_as(rows))
        for i in batch.kda:
            assert torch.equal(batch.kda[i], src.kda[i].expand_as(batch.kda[i]))
        assert batch.seq_lens.tolist() == [5, 5, 5]

        src.reset()
        assert len(src.free) == free and src.length == src.pages == 0 and int(src.page_table.abs().sum()) == 0
        assert all(float(s.abs().sum()) == 0 for s in src.kda.values())


def test_buckets() -> None:
    assert [bucket(b) for b in (1, 2, 3, 4, 5, 8, 9, 33, 64)] == [1, 2, 4, 4, 8, 8, 16, 64, 64]


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

    pinned = bind_ops("live", reg, versions={op: 1})  # what the end-to-end comparison's baseline arm runs
    assert pinned[op].record.version == 1 and pinned[op].fn is not swapped.ops[op].fn

    reg.rollback(op)
    restored = Engine(CFG, impl="live", device="cpu", registry=reg, verify=True)
    report = restored.generate(restored.prompts(BATCH, PROMPT), NEW, warmup=False)
    assert all(r.version == 1 and r.within_tolerance for r in report.ops)


def test_report_metrics(reg: Registry) -> None:
    engine = Engine(CFG, impl="reference", device="cpu")
    report = engine.generate(engine.prompts(BATCH, PROMPT), NEW)
    assert (report.impl, report.device, report.mode, report.bucket) == ("reference", "cpu", "eager", BATCH)
    assert (report.batch, report.prompt_len, report.new_tokens) == (BATCH, PROMPT, NEW)
    assert len(report.tokens) == BATCH and all(len(t) == NEW and all(0 <= x < CFG.vocab for x in t) for t in report.tokens)
    assert 0 < report.itl_ms_median <= report.itl_ms_p99
    assert report.ttft_ms > 0 and report.tokens_per_s > 0
    assert {r.op: r.file for r in report.ops} == {op: f"kernels/{op}/naive.py" for op in OPS}
    graph = Engine(CFG, impl="reference", device="cpu", mode="graph", model=engine.model).generate(engine.prompts(3, PROMPT), NEW)
    assert (graph.mode, graph.batch, graph.bucket, len(graph.tokens)) == ("graph", 3, 4, 3)


def test_paged_cache_scatters_pages() -> None:
    engine = Engine(CFG, impl="reference", device="cpu")
    cache = engine.model.new_cache(BATCH)
    cache.reserve(CFG.page + 1)
    pages = cache.page_table[:, :2]
    assert pages.unique().numel() == 2 * BATCH and bool((pages > 0).all())  # page 0 is padding
    assert cache.pages == 2 and int(cache.page_table[:, 2:].abs().sum()) == 0
    with pytest.raises(ValueError, match="exceed the cache's max_len"):
        cache.reserve(CFG.max_len + 1)


def test_op_shares_from_a_trace() -> None:
    """Kernels by name to their op (a profiler's suffix allowed), the rest glue, the step's remainder idle."""
    kernels = {"decode_attention": ("decode_attention_fwd_kernel", "decode_attention_merge_kernel"), "matmul": ("matmul_fwd_kernel",)}
    assert op_of("decode_attention_merge_kernel", kernels) == "decode_attention"
    assert op_of("matmul_fwd_kernel_0d1d2d", kernels) == "matmul"
    assert op_of("matmul_fwd_kernelx", kernels) == "glue"
    events = [
        {"ph": "X", "cat": "kernel", "name": "decode_attention_fwd_kernel", "dur": 300.0},
        {"ph": "X", "cat": "kernel", "name": "decode_attention_merge_kernel", "dur": 100.0},
        {"ph": "X", "cat": "kernel", "name": "matmul_fwd_kernel", "dur": 200.0},
        {"ph": "X", "cat": "kernel", "name": "void at::native::vectorized_elementwise_kernel<4>", "dur": 100.0},
        {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoD", "dur": 20.0},
        {"ph": "X", "cat": "cpu_op", "name": "aten::add", "dur": 5000.0},
    ]
    source, rows = shares(Profile(events=events, steps=2, wall_ms=9.0, kernels=kernels, ops=("decode_attention", "matmul")), step_ms=0.5)
    got = {r.op: round(r.ms_per_step, 6) for r in rows}
    assert source == "device" and got == {"decode_attention": 0.2, "matmul": 0.1, "glue": 0.06, "idle": 0.14}
    assert sum(r.share for r in rows) == pytest.approx(1.0)


def test_triton_kernels_are_found_beside_the_launcher(reg: Registry) -> None:
    bound = bind_ops("live", reg)
    assert bound["decode_attention"].kernels == triton_kernels(bound["decode_attention"].fn) == ("decode_attention_fwd_kernel",)
    path = AGENT_RUNS / "matmul-20261202T172148160188/candidates/05-autotune_configs_keys.py"  # an autotuned kernel
    spec = importlib.util.spec_from_file_location("_test_autotuned_matmul", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert triton_kernels(module.matmul) == ("matmul_fwd_kernel",)


def test_bad_input() -> None:
    engine = Engine(CFG, impl="reference", device="cpu")
    with pytest.raises(EngineError, match="at least 2"):
        engine.generate(engine.prompts(1, 2), 1)
    with pytest.raises(EngineError, match="exceed the model's max_len"):
        engine.generate(engine.prompts(1, CFG.max_len), 2)
    runner = CliRunner()
    for args, message in (
        (["--impl", "fast"], "error: unknown impl 'fast' (auto, reference or live)"),
        (["--model", "huge"], "error: unknown model preset 'huge' (tiny, small, h200)"),
        (["--format", "xml"], "error: unknown format 'xml' (table or json)"),
        (["--mode", "fast"], "error: unknown mode 'fast' (auto, eager or graph)"),
        (["--impl", "reference", "--verify"], "error: --verify compares live ops with their references: it needs --impl live (or auto on a GPU)"),
        (["--impl", "live", "--device", "cpu", "--mode", "graph", "--verify"],
         "error: --verify shadows every call with the reference and compares on the host, which a CUDA graph cannot replay: use --mode eager"),
    ):
        result = runner.invoke(app, ["serving", "engine", *args])
        assert result.exit_code == 2 and result.output.strip() == message, result.output


def test_cli_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATTERNS_REGISTRY", str(tmp_path / "registry"))
    result = CliRunner().invoke(app, ["serving", "engine", "--batch", "2", "--prompt-len", "2", "--steps", "2", "--impl", "reference", "--format", "json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["impl"] == "reference" and report["batch"] == 2 and len(report["tokens"]) == 2 and report["mode"] == "eager"
    assert [op["op"] for op in report["ops"]] == list(OPS)


def test_reference_path_of_the_gpu_preset_keeps_the_cache_dtype() -> None:
    """The `small` preset's bf16 paged pool takes the reference projection's fp32 K/V (a crash on the H200 once)."""
    from patterns.serving.model import PRESETS

    engine = Engine(PRESETS["small"], impl="reference", device="cpu")
    with torch.inference_mode():
        tokens, _, logits = engine.run(engine.prompts(1, 2), 2)
    assert tokens.shape == (1, 2) and torch.isfinite(logits).all()
