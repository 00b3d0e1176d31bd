"""Reference case 2: prefill with KV-cache transfer, before and after the GIL-release rewrite.

The wall-clock rule (prefill + transfer within 5% of prefill alone) is asserted
with a wide margin: the baseline's held GIL costs about 40%, the released waits
about 1% (the last layer's send). The timeline assertion is structural: two
native waits that hold the GIL can never run at the same time, whatever the
machine's load, because each wait stamps its own entry and exit inside the call.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import patterns.serving.prefill as prefill_module
from patterns.cli import app
from patterns.rewriter.base import apply
from patterns.core.ops import OpError
from patterns.serving.overlap import check_overlap

BASELINE = Path(prefill_module.__file__)


@pytest.fixture(scope="module")
def released(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """serving/prefill.py after `patterns apply release_gil_native_wait`."""
    applied = apply("release_gil_native_wait", BASELINE.read_text(), str(BASELINE))
    path = tmp_path_factory.mktemp("released") / "prefill.py"
    path.write_text(applied.candidate.source)
    return path


@pytest.fixture(scope="module")
def baseline_run(tmp_path_factory: pytest.TempPathFactory):
    trace = tmp_path_factory.mktemp("trace") / "prefill.json"
    return check_overlap(BASELINE, rounds=5, trace=trace), trace


def test_the_rewrite_changes_only_the_library_handle(released: Path) -> None:
    before, after = BASELINE.read_text().splitlines(), released.read_text().splitlines()
    changed = [(a, b) for a, b in zip(before, after) if a != b]
    assert len(before) == len(after)
    assert changed == [('_native = ctypes.PyDLL(str(native.library("wait")))', '_native = ctypes.CDLL(str(native.library("wait")))')]


def test_baseline_fails_the_rule_and_its_waits_never_overlap(baseline_run) -> None:
    check, _ = baseline_run
    assert (check.layer, check.passed) == ("overlap", False)
    # structural: a PyDLL wait holds the GIL, so the other thread cannot even enter its wait
    assert check.details["native_overlap_median"] == 0.0
    assert check.details["gap_median"] > 0.2, check.reason
    assert "holds the GIL" in check.reason


def test_released_waits_pass_the_rule(released: Path) -> None:
    check = check_overlap(released, rounds=15)
    assert check.passed, check.reason
    assert check.details["native_overlap_median"] > 0.5, check.reason
    lo, hi = check.details["gap_ci95"]
    assert lo <= check.details["gap_median"] <= hi


def test_trace_shows_both_threads(baseline_run) -> None:
    _, trace = baseline_run
    events = json.loads(trace.read_text())["traceEvents"]
    processes = {e["pid"]: e["args"]["name"] for e in events if e["name"] == "process_name"}
    assert sorted(processes.values()) == ["prefill + transfer", "prefill alone"]
    with_transfer = next(pid for pid, name in processes.items() if name == "prefill + transfer")
    threads = {e["tid"]: e["args"]["name"] for e in events if e["name"] == "thread_name" and e["pid"] == with_transfer}
    assert sorted(threads.values()) == ["MainThread", prefill_module.TRANSFER_THREAD]
    spans = [e for e in events if e["ph"] == "X" and e["pid"] == with_transfer]
    layers = prefill_module.PrefillConfig().layers
    for tid, thread in threads.items():
        names = {e["name"].split(" L")[0] for e in spans if e["tid"] == tid}
        assert names == ({"layer", "device wait"} if thread == "MainThread" else {"queued", "send", "completion wait"})
        assert sum(e["name"].startswith(("device wait", "completion wait")) for e in spans if e["tid"] == tid) == layers
    assert all(e["dur"] >= 0 and e["ts"] >= 0 for e in spans)


def test_a_transfer_that_skips_the_copy_fails(released: Path, tmp_path: Path) -> None:
    source = released.read_text()
    lazy = source.replace("store.write_layer(i_l, req.pool[i_l], req.page_ids)", "pass  # the pages never leave")
    assert lazy != source
    path = tmp_path / "lazy.py"
    path.write_text(lazy)
    check = check_overlap(path, rounds=1)
    assert check.passed is False
    assert check.reason == "the transfer is wrong: the store's pages differ from the pool's"


def test_a_transfer_that_sends_layers_before_they_are_computed_fails(released: Path, tmp_path: Path) -> None:
    source = released.read_text()
    hurried = source.replace("ready.put((i_l, time.perf_counter_ns()))", "pass").replace(
        "        sender.start()\n", "        sender.start()\n        for i_early in range(req.cfg.layers):\n            ready.put((i_early, time.perf_counter_ns()))\n"
    )
    assert hurried.count("i_early") == 2 and "ready.put((i_l" not in hurried
    path = tmp_path / "hurried.py"
    path.write_text(hurried)
    check = check_overlap(path, rounds=1)
    assert check.passed is False
    assert check.reason == "the transfer is wrong: the store's pages differ from the pool's"


def test_a_file_without_the_entry_point_is_bad_input(tmp_path: Path) -> None:
    path = tmp_path / "other.py"
    path.write_text("def run():\n    pass\n")
    with pytest.raises(OpError, match="has no 'prefill"):
        check_overlap(path, rounds=1)
    result = CliRunner().invoke(app, ["serving", "prefill", "--impl", str(path)])
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [f"error: {path} has no 'prefill(req, store, timeline)' entry point (see serving/prefill.py)"]


def test_cli_reports_the_gap_as_json(tmp_path: Path) -> None:
    trace = tmp_path / "t.json"
    result = CliRunner().invoke(app, ["serving", "prefill", "--rounds", "1", "--format", "json", "--trace", str(trace)])
    assert result.exit_code == 1, result.output  # the baseline fails its rule
    (check,) = json.loads(result.stdout)
    assert check["layer"] == "overlap" and check["passed"] is False and check["details"]["rounds"] == 1
    assert json.loads(trace.read_text())["traceEvents"]
