"""The validation gate on a test op (tests/validation_op: out = x @ w + b, K split in partitions).

One full run of the honest candidate over the whole declared grid backs most
assertions (module fixture); the rest are small unit tests of the pieces and
the `patterns validate` command's handling of bad input.
"""
import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
import typer
from typer.testing import CliRunner

from patterns.core.compare import precision_bound, precision_mismatch
from patterns.core.records import CheckResult, EvidenceBundle
from patterns.validation.bundle import read_bundle, verdict, write_bundle
from patterns.validation.cli import validate_command
from patterns.validation.gate import validate
from patterns.validation.integrity import _limits
from patterns.core.ops import OpError, available_ops, load_reference, load_spec
from patterns.validation.loader import load_impl
from patterns.validation.sandbox import Child
from patterns.validation.monitor import Launch, Observed
from patterns.validation.partition import check_partition
from patterns.core.stats import bootstrap_ci
from patterns.validation.perf import check_performance
from patterns.validation.runner import collect, errors, first_mismatch
from patterns.core.opspec import Tolerance
from patterns.validation.static import scan

HERE = Path(__file__).parent
OP = HERE / "validation_op"
SPEC = load_spec(str(OP / "spec.py"))
SMALL = load_spec(str(OP / "spec_small.py"))
HONEST = HERE / "candidates" / "honest_rowdot.py"


@pytest.fixture(scope="module")
def honest(tmp_path_factory):
    out = tmp_path_factory.mktemp("evidence")
    return validate(str(OP / "spec.py"), HONEST, device="cpu", out_dir=out), out


# -- the full gate on an honest candidate --------------------------------------------------


def test_correctness_covers_the_declared_grid(honest):
    bundle, _ = honest
    checks = [c for c in bundle.checks if c.name == "correctness"]
    assert [(c.shape["M"], c.shape["K"], c.shape["dtype"]) for c in checks] == [
        (3, 67, "float32"), (2, 130, "float32"), (3, 67, "float16"), (2, 130, "float16")
    ]
    for c in checks:
        assert c.passed, c.reason
        assert c.details["seeds"] == [0, 1, 2]
        assert c.details["orders"] == ["baseline first", "candidate first"]
        tol = SPEC.tolerance[c.shape["dtype"]]
        assert c.details["max_abs_err"] <= tol.atol + tol.rtol * 20  # |out| < 20 here
    f32 = checks[0].details
    assert 0 < f32["max_abs_err"] < 1e-5 and 0 < f32["baseline_max_abs_err"] < 1e-5
    # a different BLOCK_K sums in a different order: close, not bit-identical
    assert f32["bit_identical_to_baseline"] is False


def test_partition_error_is_reported_per_count(honest):
    bundle, _ = honest
    (part,) = [c for c in bundle.checks if c.layer == "partition"]
    assert part.passed, part.reason
    assert part.shape == {"M": 1, "K": 515, "dtype": "float32"}
    assert [p["n"] for p in part.details["candidate"]] == [1, 8, 64]
    assert [p["n"] for p in part.details["baseline"]] == [1, 8, 64]
    for p in part.details["candidate"]:
        assert p["passed"] and p["rel_err"] < 1e-5
        assert "rel_err_vs_unpartitioned" in p
    assert part.reason.startswith("partition: K splits within tolerance; rel err by count: n=1: ")


def test_integrity_and_performance_layers(honest):
    bundle, _ = honest
    integrity = {c.name: c for c in bundle.checks if c.layer == "integrity"}
    assert all(c.passed for c in integrity.values()), [c.reason for c in integrity.values() if not c.passed]
    for name in ("perturb x", "perturb w", "perturb b", "cache probe", "unwritten output", "static: torch ops", "runtime: threads"):
        assert name in integrity
    # integrity runs the unsplit path: the honest rewrite's single fused kernel
    assert integrity["runtime: kernel launch"].reason == "integrity: launches ['rowdot_fused_kernel']"
    (speed,) = [c for c in bundle.checks if c.layer == "performance"]
    assert speed.passed is None
    assert speed.reason == "performance: needs GPU (no CUDA device here; interpreter timings are never reported)"
    assert bundle.passed and verdict(bundle) == "pass (performance not run here)"


def test_bundle_files(honest):
    bundle, out = honest
    js, md = out / "rowdot--honest_rowdot.json", out / "rowdot--honest_rowdot.md"
    assert sorted(p.name for p in out.iterdir()) == [js.name, md.name]  # no temp file left behind
    assert read_bundle(js) == bundle
    env = json.loads(js.read_text())["environment"]
    assert env["torch"] == torch.__version__ and env["interpreter"] is True and env["gpu"] is None
    assert env["commit"] is None or len(env["commit"]) == 40
    text = md.read_text()
    assert "- verdict: **pass (performance not run here)**" in text
    assert "| M=3, K=67, dtype=float32 | " in text
    assert "## Partitioned vs unpartitioned (K splits, M=1, K=515, dtype=float32)" in text
    assert "| integrity | perturb w | M=3, K=67, dtype=float32 | pass | integrity: output follows input w |" in text


def test_precision_bound_is_rounding_plus_accumulation():
    want = torch.tensor([4.0, -2.0, 0.0], dtype=torch.float64)
    got = precision_bound(want, torch.bfloat16, "float32", 100)
    # one bf16 step (2 * 2^-8) of |ref|, 2 * 100 terms at fp32's 2^-24 of max|ref| = 4, one subnormal step
    expect = 2 ** -7 * want.abs() + (1 + 2 ** -7) * 2 * 100 * 2 ** -24 * 4 + torch.finfo(torch.bfloat16).tiny * 2 ** -7
    assert torch.equal(got, expect)
    assert float(got[2]) < 1e-4 < float(got[1])


def test_precision_mismatch_names_the_accumulation():
    precise = {"out": torch.tensor([45.0, -3.0], dtype=torch.float64)}
    want = {"out": torch.tensor([45.0, -3.0], dtype=torch.float16)}
    # fp16 steps are 2^-5 on [32, 64): the bound at 45 is 2^-10 * 45 + 2 * 2053 * 2^-24 * 45 (~0.055)
    one_step = {"out": torch.tensor([45.03125, -3.0], dtype=torch.float16)}
    ratio, bad = precision_mismatch(one_step, precise, want, "float32", 2053, "float16")
    assert bad is None and 0.5 < ratio < 0.6
    three_steps = {"out": torch.tensor([45.09375, -3.0], dtype=torch.float16)}
    ratio, bad = precision_mismatch(three_steps, precise, want, "float32", 2053, "float16")
    assert bad is not None and bad.where == "out[0]" and 1.6 < ratio < 1.8
    assert "what float32 accumulation allows" in bad.describe() and "consistent with accumulating in float16" in bad.describe()
    # the same error is within what float16 accumulation would allow
    assert precision_mismatch(three_steps, precise, want, "float16", 2053, "float16")[1] is None


def test_write_bundle_replaces_atomically(tmp_path):
    bundle = EvidenceBundle(op="rowdot", candidate="c.py", baseline="b.py")
    first, _ = write_bundle(bundle, tmp_path)
    bundle.checks = []
    bundle.created = "later"
    second, _ = write_bundle(bundle, tmp_path)
    assert first == second and read_bundle(second).created == "later"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


# -- partition drift, named by count ---------------------------------------------------------


def test_partition_names_the_count_where_error_appears(tmp_path):
    # partials rounded to fp16 once the K reduction is split 8 ways or more
    src = (OP / "baseline.py").read_text().replace(
        "    part = torch.empty(num_splits, M, dtype=torch.float32, device=x.device)",
        "    part = torch.empty(num_splits, M, dtype=torch.float16 if num_splits >= 8 else torch.float32, device=x.device)",
    )
    drift = tmp_path / "drift.py"
    drift.write_text(src)
    host = Child("cpu")  # where the gate runs implementations
    try:
        base, _ = load_impl(SPEC, "baseline", OP / "baseline.py", host)
        cand, _ = load_impl(SPEC, "candidate", drift, host)
        (part,) = check_partition(SPEC, base, cand, load_reference(SPEC), "cpu")
    finally:
        host.close()
    assert part.passed is False
    assert part.reason.startswith("partition: out[0] = ") and " at K splits n=8 (float32 M=1,K=515)" in part.reason
    curve = {p["n"]: p for p in part.details["candidate"]}
    assert curve[1]["passed"] and not curve[8]["passed"]
    assert curve[8]["rel_err"] > 1e-4 > curve[1]["rel_err"]


# -- pieces ---------------------------------------------------------------------------------


def test_collect_names_outputs_and_inplace_inputs():
    spec = dataclasses.replace(SMALL, outputs=("o",), inplace=("state",))
    state, o = torch.zeros(2), torch.ones(3)
    assert set(collect(spec, o, {"state": state})) == {"o", "state"}
    # a state returned after the outputs is not the caller's state updated in place: the caller's tensor counts
    res = collect(spec, (o, state + 1), {"state": state})
    assert torch.equal(res["state"], torch.zeros(2)) and set(res) == {"o", "state"}
    with pytest.raises(Exception, match=r"returned 3 value\(s\)"):
        collect(spec, (o, o, o), {"state": state})


def test_errors_and_first_mismatch():
    want = {"out": torch.tensor([1.0, -2.0, 4.0])}
    got = {"out": torch.tensor([1.0, -2.5, float("nan")])}
    assert all(math.isnan(e) for e in errors(got, want))  # an unwritten element is never hidden
    bad = first_mismatch(got, want, Tolerance(1e-3, 1e-3))
    assert bad.where == "out[1]" and bad.got == -2.5 and bad.want == -2.0
    assert errors({"out": torch.tensor([1.0, -2.5, 4.0])}, want) == (0.5, 0.125)


def test_a_pattern_that_buys_accuracy_relaxes_the_speed_rule_to_its_allowance():
    from patterns.core.library import get
    from patterns.core.opspec import Acceptance

    base = Acceptance(min_speedup=1.0, max_slowdown_any_shape=0.05)
    assert base.allowing_cost(1.0) is base
    tf32x3 = base.allowing_cost(get("tf32x3_dot_precision").pattern.max_cost)
    # 1.31x the TF32 time (ratio 0.763, measured on an H200) passes; 1.6x does not
    assert 1 - tf32x3.max_slowdown_any_shape <= 0.763 and 1 - tf32x3.max_slowdown_any_shape > 1 / 1.6
    assert tf32x3.min_speedup == pytest.approx(1 / 1.5)
    # a pattern that promises speed keeps the strict rule
    assert base.allowing_cost(get("fuse_v_tiles").pattern.max_cost) == base


def test_bootstrap_interval():
    ratios = np.array([1.0, 1.02, 0.99, 1.01, 1.03, 0.98, 1.0, 1.01, 1.02, 0.99])
    lo, hi = bootstrap_ci(ratios)
    assert lo <= np.median(ratios) <= hi and 0.97 < lo and hi < 1.04
    assert bootstrap_ci(ratios) == (lo, hi)  # seeded


def test_performance_refuses_without_gpu():
    checks, ceilings = check_performance(SMALL, None, None, "cpu")
    assert ceilings == {} and [c.passed for c in checks] == [None]


def test_static_scan_reads_aliases_limits_and_baseline():
    spec = dataclasses.replace(SMALL, resource_limits={"max_num_warps": 8})
    src = (
        "import functools\nfrom torch import matmul\nimport triton\n"
        "@triton.autotune(configs=[triton.Config({'BLOCK': 64}, num_warps=16)], key=['K'])\n"
        "@triton.jit\ndef k(x, BLOCK: 'tl.constexpr'):\n    y = x.sum()\n"
        "@functools.lru_cache\ndef run(x):\n    k[(1,)](x)\n    return matmul(x, x)\n"
    )
    reasons = [f.reason for f in scan(src, spec)]
    assert reasons == [
        "integrity: num_warps=16 exceeds declared limit 8 (line 4)",
        "integrity: result cached by functools.lru_cache (run) (line 8)",
        "integrity: calls torch.matmul in launcher (line 11)",
    ]  # x.sum() inside the @triton.jit body is kernel code, not host torch


def test_static_findings_the_baseline_shares_are_allowed():
    from patterns.validation.loader import Impl
    from patterns.validation.static import static_checks

    base = Impl("baseline", Path("b.py"), "def rowdot(x, w, b):\n    return x.sum(0)\n", None, "rowdot")
    cand = Impl("candidate", Path("c.py"), "def rowdot(x, w, b):\n    return x.sum(0) + x.mean()\n", None, "rowdot")
    failing = [c.reason for c in static_checks(SMALL, base, cand) if c.passed is False]
    assert failing == ["integrity: calls Tensor.mean in launcher (line 2)"]


def test_runtime_limits_match_any_case_and_products():
    spec = dataclasses.replace(SMALL, resource_limits={"max_num_kv_splits": 64, "max_BK*BV": 4096, "max_shared_memory_bytes": 100})
    obs = Observed(launches=[Launch("k", {"NUM_KV_SPLITS": 128, "BK": 128, "BV": 64})])
    reasons = [c.reason for c in _limits(spec, obs)]
    assert reasons == [
        "integrity: NUM_KV_SPLITS=128 exceeds declared limit 64 (kernel k at run time)",
        "integrity: BK*BV=8192 exceeds declared limit 4096 (kernel k at run time)",
    ]
    ok = _limits(spec, Observed(launches=[Launch("k", {"NUM_KV_SPLITS": 8, "BK": 64, "BV": 32})]))
    assert ok[0].passed and ok[0].reason.endswith("(not measurable here: shared_memory_bytes)")


def test_bad_device_is_input_error():
    with pytest.raises(OpError, match="unknown device 'tpu'"):
        validate(SMALL, None, device="tpu")
    if not torch.cuda.is_available():
        with pytest.raises(OpError, match="no CUDA device"):
            validate(SMALL, None, device="cuda")


# -- patterns validate -------------------------------------------------------------------------


def _cli(*args):
    app = typer.Typer()
    app.command()(validate_command)
    return CliRunner().invoke(app, [str(a) for a in args])


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda p: ("no_such_op",), "error: unknown op 'no_such_op' (known: "),
        (lambda p: (OP / "spec_small.py", p / "missing.py"), "error: candidate not found: "),
        (lambda p: (OP / "spec_small.py", p / "notes.txt"), "error: candidate is not a Python file: "),
        (lambda p: (OP / "spec_small.py", p / "empty.py"), "has no launcher 'rowdot' (the baseline's entry point)"),
        (lambda p: (OP / "spec_small.py", p / "broken.py"), "does not parse: line 1: "),
        (lambda p: (OP / "spec_small.py", HONEST, "--format", "yaml"), "error: unknown format 'yaml'"),
        (lambda p: (OP / "spec_small.py", HONEST, "--pattern", "no_such_pattern"), "no_such_pattern"),
    ],
    ids=["unknown-op", "missing", "not-python", "no-launcher", "syntax-error", "bad-format", "unknown-pattern"],
)
def test_cli_bad_input_is_one_line_exit_2(tmp_path, make, message):
    (tmp_path / "notes.txt").write_text("rowdot\n")
    (tmp_path / "empty.py").write_text("import torch\n")
    (tmp_path / "broken.py").write_text("def rowdot(:\n")
    result = _cli(*make(tmp_path), "--out", tmp_path / "ev")
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert len(result.output.strip().splitlines()) == 1
    assert not (tmp_path / "ev").exists()


def test_cli_table_and_exit_codes(tmp_path):
    ok = _cli(OP / "spec_small.py", HONEST, "--out", tmp_path, "--format", "json")
    assert ok.exit_code == 0, ok.output
    assert EvidenceBundle.model_validate_json(ok.output).passed
    assert json.loads(ok.output)["verdict"] == "pass"
    assert json.loads((tmp_path / "rowdot--honest_rowdot.json").read_text())["verdict"] == "pass"
    bad = _cli(OP / "spec_small.py", HERE / "cheats" / "ignores_w.py", "--out", tmp_path)
    assert bad.exit_code == 1
    assert "REJECTED" in bad.output and "perturb w" in bad.output
    assert (tmp_path / "rowdot--ignores_w.json").exists() and (tmp_path / "rowdot--honest_rowdot.md").exists()
    # ignoring w is caught by integrity (perturbing w changes nothing): rejected, not merely failed
    assert json.loads((tmp_path / "rowdot--ignores_w.json").read_text())["verdict"] == "rejected"


def test_bundle_verdict_is_derived_from_its_checks():
    def bundle(*layers_passed):
        checks = [CheckResult(name=f"c{i}", layer=layer, passed=ok) for i, (layer, ok) in enumerate(layers_passed)]
        return EvidenceBundle(op="rowdot", candidate="c.py", baseline="b.py", checks=checks)

    cases = {
        "pass": bundle(("correctness", True), ("integrity", True), ("performance", None)),
        "fail": bundle(("correctness", False), ("integrity", True), ("performance", None)),
        "rejected": bundle(("correctness", False), ("integrity", False), ("performance", None)),
    }
    for want, b in cases.items():
        assert b.verdict == want and b.passed == (want == "pass")
        dumped = json.loads(b.model_dump_json())
        assert dumped["verdict"] == want
        assert EvidenceBundle.model_validate_json(b.model_dump_json()).verdict == want
    # a bundle claiming a verdict its checks do not support is read with the checks' verdict
    forged = {**json.loads(cases["rejected"].model_dump_json()), "verdict": "pass"}
    assert EvidenceBundle.model_validate(forged).verdict == "rejected"
    assert verdict(cases["rejected"]) == "REJECTED" and verdict(cases["fail"]) == "FAIL"
    assert verdict(cases["pass"]) == "pass (performance not run here)"


# -- the project's own ops ---------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("op", available_ops())
def test_op_baseline_passes_its_own_gate(op):
    """Each kernels/<op> baseline against itself, on its first shape and dtype (the full grid runs on the GPU)."""
    spec = load_spec(op)
    small = dataclasses.replace(spec, shapes=spec.shapes[:1], dtypes=spec.dtypes[:1], partition=None)
    bundle = validate(small, None, device="cpu")
    assert [c.reason for c in bundle.checks if c.passed is False] == []
