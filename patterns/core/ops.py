"""The op registry: the ops of kernels/, found by path, and the device they run on.

An op is a folder `kernels/<op>/` with a `spec.py` that defines `SPEC =
OpSpec(...)` (patterns.core.opspec); the folder list is the op list. An op
timed on a GPU also has a `benchmark.py` (`BENCHMARK`, patterns.core.benchspec).
A spec names its launcher and reference as "module:function" (`baseline=
"baseline:kda_decode"`), where the module is a file of the op's folder, a
dotted module or a path to a `.py` file. An op may also be given as the path
to a spec.py anywhere, or a folder holding one (a user's own kernel, written
by `patterns spec init`); `resolve_op` is the one place an op argument is
turned into a spec.

Ops are data to the core, like pattern folders: the registry locates the
folder the kernels package is installed from without importing it, and loads
an op's modules under that package's name so their own imports resolve.
"""
from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

from patterns.core.benchspec import Benchmark
from patterns.core.opspec import OpSpec

# where setup.py installs the kernels/ folder
OPS_PACKAGE = "patterns.kernels"


class OpError(ValueError):
    """An op that cannot be found or loaded, or a device that cannot run it: one line, CLI exit 2."""


def kernels_dir() -> Path:
    """The folder of the ops (kernels/ of a checkout, or the installed package's)."""
    found = importlib.util.find_spec(OPS_PACKAGE)
    if found is None or not found.submodule_search_locations:
        raise OpError(f"{OPS_PACKAGE}: not installed")
    return Path(next(iter(found.submodule_search_locations)))


def available_ops() -> list[str]:
    """The op names: every folder of kernels/ with a spec.py, sorted."""
    return sorted(p.parent.name for p in kernels_dir().glob("*/spec.py"))


def spec_path(op: str) -> Path | None:
    """The spec.py an op argument names when it is a path (a spec.py, or a folder holding one); None for an op name."""
    path = Path(op)
    if op.endswith(".py"):
        return path
    if os.sep in op or "/" in op or path.is_dir():
        return path / "spec.py"
    return None


def resolve_op(op: str) -> tuple[str, OpSpec]:
    """(key, spec) for an op name, a spec.py path or a folder with a spec.py: the one resolution of an op
    argument for every entry point and driver. The key is the op's name for an op of kernels/ and the
    spec's absolute path for any other, so a record keeps what loads the same spec again."""
    path = spec_path(op)
    spec = load_spec(op)
    if path is None or path.resolve() == (kernels_dir() / spec.name / "spec.py").resolve():
        return spec.name, spec
    return str(path.resolve()), spec


def is_builtin(spec: OpSpec) -> bool:
    """Whether the spec is an op of kernels/ (its baseline lives in kernels/<op>/)."""
    try:
        return source_path(spec, spec.baseline).resolve().parent == (kernels_dir() / spec.name).resolve()
    except OpError:
        return False


def load_spec(op: str | OpSpec) -> OpSpec:
    """An op by name (kernels/<op>/spec.py), by path to a spec.py or a folder holding one, or an OpSpec as is."""
    if isinstance(op, OpSpec):
        return op
    path = spec_path(op)
    if path is not None:
        if not path.is_file():
            raise OpError(f"op spec not found: {path}")
        module = _load_spec_module(path)
    else:
        if op not in available_ops():
            known = ", ".join(available_ops()) or "none"
            raise OpError(f"unknown op '{op}' (known: {known}; or give a spec.py or a folder with one)")
        module = importlib.import_module(f"{OPS_PACKAGE}.{op}.spec")
    spec = getattr(module, "SPEC", None)
    if not isinstance(spec, OpSpec):
        raise OpError(f"{path or op}: spec.py defines no SPEC = OpSpec(...)")
    return spec


def _load_spec_module(path: Path) -> ModuleType:
    """A user's spec.py, imported; any failure is one line naming the file."""
    try:
        return load_module(path, f"_patterns_opspec_{path_digest(path)}")
    except SyntaxError as exc:
        raise OpError(f"{path}: line {exc.lineno}: syntax error: {exc.msg}") from None
    except OpError:
        raise
    except Exception as exc:  # noqa: BLE001 - the user's file: whatever it raises is bad input
        raise OpError(f"{path}: the spec failed to load: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}") from None


def load_function(target: str, what: str = "function") -> Callable[..., Any]:
    """The function a "module:function" target names, where the module is a path to a .py file or a dotted module."""
    module, func = split_target(target)
    try:
        if module.endswith(".py"):
            if not Path(module).is_file():
                raise OpError(f"{module}: no such file (the {what} '{target}')")
            mod = load_module(Path(module), f"_patterns_fn_{path_digest(Path(module))}")
        else:
            mod = importlib.import_module(module)
    except OpError:
        raise
    except SyntaxError as exc:
        raise OpError(f"{exc.filename or module}: line {exc.lineno}: syntax error: {exc.msg}") from None
    except Exception as exc:  # noqa: BLE001
        raise OpError(f"{module}: failed to import ({what}): {type(exc).__name__}: {exc}") from None
    fn = getattr(mod, func, None)
    if not callable(fn):
        raise OpError(f"{module}: no function '{func}' (the {what})")
    return fn


def load_benchmark(op: str) -> Benchmark | None:
    """The op's GPU benchmark (kernels/<op>/benchmark.py, patterns.core.benchspec); None when it has none."""
    if op not in available_ops():
        raise OpError(f"unknown op '{op}' (known: {', '.join(available_ops()) or 'none'})")
    if not (kernels_dir() / op / "benchmark.py").is_file():
        return None
    bench = getattr(importlib.import_module(f"{OPS_PACKAGE}.{op}.benchmark"), "BENCHMARK", None)
    if not isinstance(bench, Benchmark):
        raise OpError(f"{op}: benchmark.py defines no BENCHMARK = Benchmark(...)")
    return bench


def benchmarked_ops() -> list[str]:
    """The ops with a GPU benchmark, in the order their report sections stand."""
    ops = [op for op in available_ops() if (kernels_dir() / op / "benchmark.py").is_file()]
    return sorted(ops, key=lambda op: load_benchmark(op).position)


def split_target(target: str) -> tuple[str, str]:
    """("module", "function") of a "module:function" target."""
    module, sep, func = target.rpartition(":")
    if not sep or not module or not func:
        raise OpError(f"'{target}' is not 'module:function'")
    return module, func


def source_path(spec: OpSpec, target: str) -> Path:
    """The file a "module:function" target lives in: a path, a dotted module or kernels/<op>/<module>.py."""
    module, _ = split_target(target)
    if module.endswith(".py"):
        return Path(module)
    if "." in module:
        found = importlib.util.find_spec(module)
        if found is None or not found.origin:
            raise OpError(f"{spec.name}: module '{module}' not found")
        return Path(found.origin)
    return kernels_dir() / spec.name / f"{module}.py"


def resolve(spec: OpSpec, target: str, what: str = "") -> Callable[..., Any]:
    """The function a "module:function" target of the spec names (`what` it is, for the error)."""
    module, func = split_target(target)
    if module.endswith(".py") or "." in module:
        return load_function(target, f"{spec.name}'s {what or 'function'}")
    mod = importlib.import_module(f"{OPS_PACKAGE}.{spec.name}.{module}")
    fn = getattr(mod, func, None)
    if not callable(fn):
        raise OpError(f"{spec.name}: {what + ' ' if what else ''}'{target}' not found")
    return fn


def load_reference(spec: OpSpec) -> Callable[..., Any]:
    """The op's plain PyTorch reference."""
    return resolve(spec, spec.reference, "reference")


def op_package(spec: OpSpec, path: Path) -> str:
    """The package a file of the op's own folder is imported in (relative imports resolve there); '' elsewhere."""
    inside = path.resolve().parent == (kernels_dir() / spec.name).resolve()
    return f"{OPS_PACKAGE}.{spec.name}" if inside else ""


def path_digest(path: Path) -> str:
    """A short name-safe digest of a file's absolute path, for module names."""
    return hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:10]


def load_module(path: Path, name: str) -> ModuleType:
    """Import the file as module `name`, afresh; on failure nothing is left in sys.modules."""
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise OpError(f"{path}: cannot import")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


def resolve_device(device: str) -> str:
    """'auto', 'cpu' or 'cuda[:N]' as the device ops run on: auto is CUDA when there is one and
    Triton's interpreter is off."""
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") != "1" else "cpu"
    if device.startswith("cuda"):
        if not torch.cuda.is_available():
            raise OpError("device 'cuda' asked for, but no CUDA device is available")
        if os.environ.get("TRITON_INTERPRET") == "1":
            raise OpError("device 'cuda' asked for, but TRITON_INTERPRET=1 is set")
        return device
    if device == "cpu":
        return device
    raise OpError(f"unknown device '{device}' (auto, cpu or cuda)")
