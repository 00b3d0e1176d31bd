"""The GPU benchmark command and its report, checked where there is no GPU.

The benchmark's variants (the rewrite chains, upstream, every launch of its
sweeps) run once each on the interpreter against the op's reference; the ops'
targets and the report are checked on hand-made results whose verdicts are known.
"""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

from patterns import benchmark
from patterns.core import benchspec
from patterns.core.ops import benchmarked_ops, load_benchmark
from patterns.core.opspec import Tolerance
from patterns.validation import benchmarks_report


def test_each_benchmark_is_defined_beside_its_op():
    """The cases are the ops with a kernels/<op>/benchmark.py, in report order; every step is a chain of the library's rewrites."""
    from patterns.core.library import load_library

    rewrites = {e.pattern.transformation.rewrite for e in load_library()} - {None}
    assert benchmarked_ops() == ["kda_decode", "cp_state_merge", "decode_attention", "matmul"]
    for op in benchmarked_ops():
        bench = load_benchmark(op)
        chains = [s.chain for s in bench.steps] + [chain for _, chain in bench.sweeps]
        assert bench.steps and {p for chain in chains for p, _ in chain} <= rewrites
    assert load_benchmark("rmsnorm_gate") is None


@pytest.mark.parametrize("op", ["cp_state_merge", "decode_attention", "matmul"])
def test_every_variant_computes_the_op(op):
    results = benchmark.smoke(op, log=lambda s: None)
    steps = [s.label for s in load_benchmark(op).steps]
    assert {"baseline", *steps} <= set(results)
    assert len(results) > len(steps) + 1, "the sweep's launch variants run too"
    bad = {name: e.get("mismatch", e.get("error")) for name, e in results.items() if not e.get("correct")}
    assert not bad
    assert all(e["rel_err"] < 1e-3 for e in results.values())


def test_candidates_are_the_rewrites_of_the_baseline(tmp_path):
    src = benchmark.apply_chain("kda_decode", load_benchmark("kda_decode").steps[-1].chain, tmp_path / "c.py")
    # the V tile sized from the SM count (split_underfilled_grid) after the fusion's warps rule (fuse_v_tiles)
    assert "while BV > 16 and B * HV * triton.cdiv(V, BV) < 4 * _num_sms(q.device):" in src
    assert "num_warps = min(4, max(1, BK * BV // 2048))" in src
    # then L2 hints: q, k and g are read by every V tile of a head (folded into axis 0 beside it)
    assert 'b_q = tl.load(p_q, mask=m_k, other=0., eviction_policy="evict_last")' in src
    assert 'b_v = tl.load(p_v, mask=m_v, other=0., eviction_policy="evict_first")' in src
    # decode attention: the split kernel, then one program per KV head for the group's query heads
    src = benchmark.apply_chain("decode_attention", load_benchmark("decode_attention").steps[-1].chain, tmp_path / "d.py")
    assert "decode_attention_fwd_kernel[(B * HK, num_splits)](" in src and "decode_attention_merge_kernel[(B * HQ,)](" in src
    src = benchmark.apply_chain("cp_state_merge", load_benchmark("cp_state_merge").steps[-1].chain, tmp_path / "m.py")
    assert 'input_precision="tf32x3"' in src and "num_warps = 8 if max(BK, BV) >= 128 else 4" in src


def test_compare_names_the_first_bad_element():
    want = {"o": torch.ones(4), "lse": torch.ones(2)}
    tol = Tolerance(atol=1e-3, rtol=1e-3)
    assert benchmark.compare({"o": torch.ones(4), "lse": torch.ones(2)}, want, tol) == (0.0, 0.0, None)
    abs_err, rel_err, bad = benchmark.compare({"o": torch.tensor([1, 1, 1.5, 1]), "lse": torch.ones(2)}, want, tol)
    assert abs_err == 0.5 and rel_err == 0.5 and bad.startswith("o[2] = 1.5 vs reference 1")
    _, _, bad = benchmark.compare({"o": torch.tensor([1, float("nan"), 1, 1]), "lse": torch.ones(2)}, want, tol)
    assert "NaN" in bad


def _row(B: int, times: dict[str, list[float]], final: str, best: str) -> dict:
    """A measured row as the benchmark writes it, from per-round times (µs)."""
    import numpy as np

    arr = {k: np.array(v) for k, v in times.items()}
    nbytes = 2 * B * 32 * 128 * 128 * 4
    row = {"shape": {"B": B}, "dtype": "bfloat16", "label": f"B={B}", "bytes": nbytes, "flops": 7 * B * 32 * 128 * 128,
           "limit_us": nbytes / 4.2e12 * 1e6, "final": final, "best_upstream_launch": best, "variants": {}}
    for name, t in arr.items():
        us = float(np.median(t))
        role = {"baseline": "baseline", final: "step", "FLA default": "upstream"}.get(name, "upstream-sweep")
        row["variants"][name] = {"role": role, "note": "", "us": us, "us_rounds": list(t), "correct": True, "rel_err": 1e-3,
                                 "GBps": nbytes / us / 1e3, "fraction_of_copy": nbytes / us / 1e3 / 4200,
                                 "TFLOPs": row["flops"] / us / 1e6, "fraction_of_matmul": row["flops"] / us / 1e6 / 800}
    row["ratios"] = {f"{final} vs baseline": benchmark._ratio(arr, final, "baseline"),
                     f"{final} vs FLA default": benchmark._ratio(arr, final, "FLA default"),
                     f"{final} vs best upstream launch": benchmark._ratio(arr, final, best)}
    return row


def _kda_result(path: str = "kda_decode.json") -> dict:
    rows = [
        # B=1: 1.5x the default, 4% behind the best launch; B=128: 95% of copy, ahead of both
        _row(1, {"baseline": [4.4] * 10, "cand": [4.2, 4.25] * 5, "FLA default": [6.5] * 10, "FLA BV=16": [4.05] * 10}, "cand", "FLA BV=16"),
        _row(128, {"baseline": [140.0] * 10, "cand": [132.0, 133.0] * 5, "FLA default": [175.0] * 10, "FLA BV=32": [136.0] * 10},
             "cand", "FLA BV=32"),
    ]
    return {"op": "kda_decode", "device": "NVIDIA H200", "created": "2026-12-02T00:00:00Z", "environment": {"triton": "3.6.0"},
            "ceilings": {"copy_GBps": 4200.0, "matmul_TFLOPs": 800.0}, "rounds": 10, "sweep": False, "command": "cmd",
            "steps": {"cand": {"chain": "patterns apply fuse_v_tiles | patterns apply split_underfilled_grid", "source": ""}},
            "rows": rows, "_path": path}


def test_kda_targets_follow_the_measurements():
    got = {t["what"].split(":")[0] + ":" + t["what"].split(">=")[1].split("(")[0].strip(): t["met"] for t in load_benchmark("kda_decode").targets(_kda_result())}
    assert got == {
        "B=1:1.15x FLA default": True, "B=1:FLA's best launch": False,
        "B=128:90% of copy bandwidth": True, "B=128:1.15x FLA default": True, "B=128:FLA's best launch": True,
    }


def test_a_miss_within_noise_is_called_a_tie():
    assert "tie" in benchspec.ratio_target("x", {"median": 0.999, "ci95": [0.99, 1.01]}, 1.0)["measured"]
    assert "tie" not in benchspec.ratio_target("x", {"median": 0.96, "ci95": [0.93, 0.98]}, 1.0)["measured"]


def test_report_is_generated_from_the_json(tmp_path):
    res = _kda_result()
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "kda_decode.json").write_text(json.dumps({k: v for k, v in res.items() if k != "_path"}))
    (tmp_path / "run" / "NOTES.md").write_text("Fusion did not pay here.")
    out, plot = tmp_path / "BENCHMARKS.md", tmp_path / "roofline.png"
    assert benchmarks_report.main([str(tmp_path / "run"), "--out", str(out), "--plot", str(plot)]) == 0
    text = out.read_text()
    assert "| kda_decode | B=1: >= FLA's best launch (FLA BV=16) | **missed**: 0.959 [" in text
    assert "| B=128 | 140.0 | 132.5 | 127.8 | 1.06× [" in text  # baseline, candidate, limit from the bytes, ratio
    assert "Fusion did not pay here." in text and "![roofline](roofline.png)" in text
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "No GPU results for: cp_state_merge, decode_attention, matmul." in text


def test_report_bad_input_is_one_line_exit_2(tmp_path):
    bad = tmp_path / "kda_decode.json"
    bad.write_text("{not json")
    r = subprocess.run([sys.executable, "-m", "patterns.validation.benchmarks_report", str(bad), "--out", str(tmp_path / "B.md")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"error: {bad}: not readable JSON")
    assert not (tmp_path / "B.md").exists()


def test_the_benchmark_refuses_to_time_without_a_gpu(tmp_path):
    r = subprocess.run([sys.executable, "-m", "patterns.benchmark", "--out", str(tmp_path)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "error: no CUDA device" in r.stderr and "Traceback" not in r.stderr
