"""Finding an op's spec and loading its baseline, reference and a candidate.

An op lives in `kernels/<op>/` and names its launcher and reference as
"module:function" (`baseline="baseline:kda_decode"`). A candidate is a file, a
rewritten copy of the baseline module, that exposes the same launcher name.
Baseline and candidate are each imported afresh under their own module name,
inside the op's package so that relative imports still resolve: they never
share a JIT cache or a module-level cache with each other or with an earlier run.
"""
from __future__ import annotations

import ast
import hashlib
import importlib
import importlib.util
import itertools
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

from patterns.core.opspec import OpSpec

_counter = itertools.count()


class GateInputError(ValueError):
    """Bad input to the gate (unknown op, unusable candidate): one line, CLI exit 2."""


@dataclass
class Impl:
    """A loaded implementation of an op: the baseline or a candidate."""

    role: str  # "baseline" | "candidate"
    path: Path
    source: str
    module: ModuleType
    launcher_name: str

    @property
    def launcher(self) -> Callable[..., Any]:
        return getattr(self.module, self.launcher_name)


def kernels_dir() -> Path:
    import patterns.kernels

    return Path(next(iter(patterns.kernels.__path__)))


def available_ops() -> list[str]:
    return sorted(p.parent.name for p in kernels_dir().glob("*/spec.py"))


def load_spec(op: str | OpSpec) -> OpSpec:
    """An op by name (kernels/<op>/spec.py), by path to a spec.py, or an OpSpec as is."""
    if isinstance(op, OpSpec):
        return op
    if op.endswith(".py"):
        path = Path(op)
        if not path.is_file():
            raise GateInputError(f"op spec not found: {path}")
        module = _exec(path, f"_patterns_opspec_{_digest(path)}")
    else:
        if op not in available_ops():
            known = ", ".join(available_ops()) or "none"
            raise GateInputError(f"unknown op '{op}' (known: {known})")
        module = importlib.import_module(f"patterns.kernels.{op}.spec")
    spec = getattr(module, "SPEC", None)
    if not isinstance(spec, OpSpec):
        raise GateInputError(f"{op}: spec.py defines no SPEC = OpSpec(...)")
    return spec


def split_target(target: str) -> tuple[str, str]:
    module, sep, func = target.rpartition(":")
    if not sep or not module or not func:
        raise GateInputError(f"'{target}' is not 'module:function'")
    return module, func


def source_path(spec: OpSpec, target: str) -> Path:
    """The file a "module:function" target lives in: a path, a dotted module or kernels/<op>/<module>.py."""
    module, _ = split_target(target)
    if module.endswith(".py"):
        return Path(module)
    if "." in module:
        found = importlib.util.find_spec(module)
        if found is None or not found.origin:
            raise GateInputError(f"{spec.name}: module '{module}' not found")
        return Path(found.origin)
    return kernels_dir() / spec.name / f"{module}.py"


def check_candidate(spec: OpSpec, candidate: Path | None) -> Path:
    """The candidate file to validate (the baseline itself when None), checked before anything runs."""
    if candidate is None:
        return source_path(spec, spec.baseline)
    path = Path(candidate)
    if not path.exists():
        raise GateInputError(f"candidate not found: {path}")
    if not path.is_file() or path.suffix != ".py":
        raise GateInputError(f"candidate is not a Python file: {path}")
    _, launcher = split_target(spec.baseline)
    try:
        tree = ast.parse(path.read_text(), filename=str(path))
    except SyntaxError as e:
        raise GateInputError(f"candidate {path} does not parse: line {e.lineno}: {e.msg}") from None
    if launcher not in _top_level_names(tree):
        raise GateInputError(f"candidate {path} has no launcher '{launcher}' (the baseline's entry point)")
    return path


def load_impl(spec: OpSpec, role: str, path: Path) -> Impl:
    _, launcher = split_target(spec.baseline)
    package = f"patterns.kernels.{spec.name}" if path.resolve().parent == (kernels_dir() / spec.name).resolve() else ""
    name = f"_gate_{role}_{path.stem}_{_digest(path)}_{next(_counter)}"
    try:
        module = _exec(path, f"{package}.{name}" if package else name)
    except Exception as e:  # noqa: BLE001 - any import failure is bad input, named in one line
        raise GateInputError(f"{role} {path} failed to import: {type(e).__name__}: {e}") from None
    if not callable(getattr(module, launcher, None)):
        raise GateInputError(f"{role} {path} has no launcher '{launcher}' (the baseline's entry point)")
    return Impl(role, path, path.read_text(), module, launcher)


def load_reference(spec: OpSpec) -> Callable[..., Any]:
    module, func = split_target(spec.reference)
    if module.endswith(".py"):
        mod = _exec(Path(module), f"_gate_reference_{_digest(Path(module))}")
    elif "." in module:
        mod = importlib.import_module(module)
    else:
        mod = importlib.import_module(f"patterns.kernels.{spec.name}.{module}")
    fn = getattr(mod, func, None)
    if not callable(fn):
        raise GateInputError(f"{spec.name}: reference '{spec.reference}' not found")
    return fn


def _digest(path: Path) -> str:
    return hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:10]


def _exec(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise GateInputError(f"{path}: cannot import")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


def _top_level_names(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names
