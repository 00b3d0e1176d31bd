"""Running a pattern's before/after examples against its PyTorch reference.

The same harness backs the generated tests, `patterns check --run` and the
rewriter's tests. Outputs are allocated by the launchers with `torch.empty`;
here `torch.empty*` return NaN-filled tensors, so a kernel that leaves part of
its output unwritten fails instead of passing on stale memory. Inputs are
checked unmodified afterwards unless the example declares them in-place.
"""
from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the validation gate imports this module on GPU boxes without libcst
    from patterns.core.library import Entry


class ExampleError(RuntimeError):
    pass


@dataclass
class ExampleRun:
    which: str
    shape: dict[str, int]
    seed: int
    max_abs_err: float
    max_rel_err: float
    passed: bool
    reason: str = ""


def load_module(path: Path, tag: str = "") -> ModuleType:
    """Import a file under a unique module name (examples are not packages)."""
    digest = hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:10]
    name = f"_patterns_example_{path.stem}_{digest}{tag}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ExampleError(f"{path}: cannot import")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@contextlib.contextmanager
def nan_filled_empty(fill: float = float("nan")):
    """torch.empty / empty_like / empty_strided / new_empty return poisoned tensors.

    Floating tensors are filled with `fill` (NaN by default); integer tensors
    with max-int for NaN, else `int(fill)`. The validation gate also poisons
    with a finite value to tell an unwritten element from one that was read.
    """
    import math

    import torch

    originals = {"empty": torch.empty, "empty_like": torch.empty_like, "empty_strided": torch.empty_strided}
    tensor_new_empty = torch.Tensor.new_empty

    def poison(t):
        if t.is_floating_point() or t.is_complex():
            t.fill_(fill)
        elif t.dtype != torch.bool:
            t.fill_(torch.iinfo(t.dtype).max if math.isnan(fill) else int(fill))
        return t

    torch.empty = lambda *a, **k: poison(originals["empty"](*a, **k))
    torch.empty_like = lambda *a, **k: poison(originals["empty_like"](*a, **k))
    torch.empty_strided = lambda *a, **k: poison(originals["empty_strided"](*a, **k))
    own = "new_empty" in vars(torch.Tensor)  # else inherited from the C base class: removed again after
    torch.Tensor.new_empty = lambda self, *a, **k: poison(tensor_new_empty(self, *a, **k))
    try:
        yield
    finally:
        torch.empty, torch.empty_like = originals["empty"], originals["empty_like"]
        torch.empty_strided = originals["empty_strided"]
        if own:
            torch.Tensor.new_empty = tensor_new_empty
        else:
            del torch.Tensor.new_empty


def compare(out: Any, ref: Any, atol: float, rtol: float) -> tuple[bool, float, float, str]:
    """Within tolerance over (possibly tuple) outputs, with the first failing element named
    (patterns.core.compare decides: the one comparison every stage uses)."""
    from patterns.core.compare import ResultError, as_result, errors, first_mismatch
    from patterns.core.opspec import Tolerance

    got, want = as_result(out), as_result(ref)
    if len(got) != len(want):
        return False, float("inf"), float("inf"), f"returned {len(got)} outputs, reference {len(want)}"
    try:
        bad = first_mismatch(got, want, Tolerance(atol, rtol))
    except ResultError as e:
        return False, float("inf"), float("inf"), str(e)
    worst_abs, worst_rel = errors(got, want)
    return bad is None, worst_abs, worst_rel, bad.describe() if bad else ""


def run_example(entry: Entry, which: str, device: str = "cpu") -> list[ExampleRun]:
    """Run before.py or after.py over every declared shape and seed."""
    return run_file(entry, entry.file(f"{which}.py"), which, device)


def run_file(entry: Entry, path: Path, which: str = "", device: str = "cpu") -> list[ExampleRun]:
    """Run any implementation of the example's launcher (e.g. a rewritten before.py) against reference.py."""
    import torch

    from patterns.core import interpreter

    ex = entry.pattern.example
    if ex is None:
        raise ExampleError(f"{entry.folder}: example: missing")
    if device == "cpu":
        interpreter.enable()
    which = which or path.stem
    ref_mod = load_module(entry.file("reference.py"))
    mod = load_module(path)
    launcher = getattr(mod, ex.entry, None)
    if launcher is None:
        raise ExampleError(f"{path}: example.entry: no function '{ex.entry}'")
    runs = []
    for shape in ex.shapes:
        for seed in ex.seeds:
            inputs = ref_mod.make_inputs(dict(shape), seed=seed, device=device)
            snapshot = {k: v.clone() for k, v in inputs.items() if isinstance(v, torch.Tensor)}
            expected = ref_mod.reference(**{k: (v.clone() if isinstance(v, torch.Tensor) else v) for k, v in inputs.items()})
            with nan_filled_empty():
                out = launcher(**inputs)
            if device != "cpu":
                torch.cuda.synchronize()
            ok, aerr, rerr, reason = compare(out, expected, ex.atol, ex.rtol)
            if ok:
                for name, before in snapshot.items():
                    if name in ex.inplace:
                        continue
                    if not torch.equal(before.nan_to_num(0.5), inputs[name].nan_to_num(0.5)):
                        ok, reason = False, f"input '{name}' was modified"
                        break
            runs.append(ExampleRun(which, dict(shape), seed, aerr, rerr, ok, reason))
    return runs
