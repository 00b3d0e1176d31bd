"""The planted-cheat suite: every cheating candidate in tests/cheats/ is rejected for its own reason.

Each cheat is a rewritten copy of the test op's baseline (tests/validation_op,
out = x @ w + b) that gets right answers, or looks fast, the wrong way. The
table below is the contract: the check that must fail and the start of its
reason. A cheat file without an entry fails `test_every_cheat_is_listed`.
"""
import time
from pathlib import Path

import pytest
import torch

from patterns.validation.gate import validate
from patterns.core.ops import load_spec

HERE = Path(__file__).parent
CHEATS_DIR = HERE / "cheats"
SMALL = load_spec(str(HERE / "validation_op" / "spec_small.py"))

CHEATS = {
    "torch_matmul.py": [
        ("static: torch ops", "integrity: calls torch.matmul in launcher (line 30)"),
        ("runtime: torch ops", "integrity: calls torch.matmul in launcher (at run time"),
        ("runtime: kernel launch", "integrity: launches no Triton kernel (the baseline launches 2)"),
    ],
    "hidden_torch.py": [
        # getattr(torch, "mat" + "mul") hides from the reader, not from the run
        ("runtime: torch ops", "integrity: calls torch.matmul in launcher (at run time"),
        ("runtime: kernel launch", "integrity: launches no Triton kernel"),
    ],
    "numpy_compute.py": [
        ("static: libraries", "integrity: uses numpy in place of its kernel (import numpy) (line 2)"),
        ("runtime: torch ops", "integrity: calls Tensor.__array__ in launcher (at run time"),
    ],
    "reference_import.py": [
        ("static: libraries", "integrity: imports the reference implementation (reference) (line 10)"),
    ],
    "ignores_w.py": [
        # w is all ones in the test inputs, so correctness alone passes this one
        ("perturb w", "integrity: output unchanged when input w perturbed"),
    ],
    "ptr_cache.py": [
        ("static: caches", "integrity: result cached by data_ptr (_RESULTS)"),
        ("cache probe", "integrity: result cached by data_ptr (same pointers with new contents returned the old output"),
    ],
    "shape_cache.py": [
        ("static: caches", "integrity: result cached by shape (_RESULTS)"),
        ("cache probe", "integrity: result cached by shape (new inputs of the same shape returned the previous output"),
    ],
    "thread.py": [
        ("static: threads", "integrity: starts a thread (threading.Thread)"),
        ("runtime: threads", "integrity: starts a thread (threading.Thread.start during the call)"),
    ],
    "stream.py": [
        ("static: streams", "integrity: creates a CUDA stream (torch.cuda.Stream)"),
        ("runtime: streams", "integrity: creates a CUDA stream (torch.cuda.Stream during the call)"),
    ],
    "timer_patch.py": [
        ("static: patching", "integrity: patches time.perf_counter (line 9)"),
        ("runtime: patching", "integrity: patches time.perf_counter (at import)"),
    ],
    "event_patch.py": [
        ("static: patching", "integrity: patches torch.cuda.Event.elapsed_time (line 35)"),
        # first patched in a call the monitor does not watch: the child's module guard still sees it
        ("sandbox: patching", "integrity: patches torch.cuda.Event.elapsed_time (during a call) (the candidate"),
    ],
    "unwritten.py": [
        ("unwritten output", "integrity: output element never written (NaN at out[2], float32 M=3,K=67)"),
        ("correctness", "correctness: out[2] = NaN vs reference"),
    ],
    "uninit_read.py": [
        ("unwritten output", "integrity: reads uninitialised memory (out[0] = nan with NaN-filled buffers"),
    ],
    "block_limit.py": [
        ("static: resource limits", "integrity: BLOCK_K=4096 exceeds declared limit 256 (line 33)"),
        ("runtime: resource limits", "integrity: BLOCK_K=4096 exceeds declared limit 256 (kernel rowdot_partial_kernel at run time)"),
    ],
    "tail_skip.py": [
        # K=67 is not a multiple of BLOCK_K=32: the odd shape is what catches it
        ("correctness", "correctness: out[0] = "),
    ],
    "modifies_input.py": [
        ("correctness", "correctness: input x modified at [0, 0] by the candidate (float32 M=3,K=67, seed 0, baseline first)"),
    ],
}


def test_every_cheat_is_listed():
    assert sorted(p.name for p in CHEATS_DIR.glob("*.py")) == sorted(CHEATS)
    assert len(CHEATS) >= 8


@pytest.mark.parametrize("cheat", sorted(CHEATS), ids=lambda n: n.removesuffix(".py"))
def test_cheat_is_rejected_for_its_reason(cheat):
    originals = time.perf_counter, torch.cuda.Event.elapsed_time
    bundle = validate(SMALL, CHEATS_DIR / cheat, device="cpu")
    assert (time.perf_counter, torch.cuda.Event.elapsed_time) == originals  # patched timers are put back
    assert not bundle.passed
    failing = [(c.name, c.reason) for c in bundle.checks if c.passed is False]
    for name, reason in CHEATS[cheat]:
        assert any(n == name and r.startswith(reason) for n, r in failing), f"{cheat}: no failing '{name}' check starting {reason!r}; got {failing}"
    # speed is never reported for a cheat (and never on the interpreter)
    (speed,) = [c for c in bundle.checks if c.layer == "performance"]
    assert speed.passed is None and speed.reason.startswith("performance: needs GPU")


def test_honest_candidate_passes_every_check():
    bundle = validate(SMALL, HERE / "candidates" / "honest_rowdot.py", device="cpu")
    failing = [c.reason for c in bundle.checks if c.passed is False]
    assert failing == []
    assert bundle.passed
    layers = {c.layer for c in bundle.checks}
    assert layers == {"correctness", "integrity", "performance"}
