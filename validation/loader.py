"""Loading an op's baseline and a candidate for the gate (the op itself comes from patterns.core.ops).

A candidate is a file, a rewritten copy of the baseline module, that exposes
the same launcher name. Baseline and candidate are each imported afresh under
their own module name, inside the op's package so that relative imports still
resolve: they never share a JIT cache or a module-level cache with each other
or with an earlier run.
"""
from __future__ import annotations

import ast
import itertools
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

from patterns.core.ops import OpError, load_module, op_package, path_digest, source_path, split_target
from patterns.core.opspec import OpSpec

_counter = itertools.count()


class GateInputError(OpError):
    """Bad input to the gate (an unusable candidate, a spec it cannot check): one line, CLI exit 2.
    An unknown op or device is the registry's OpError, which this extends."""


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
    package = op_package(spec, path)
    name = f"_gate_{role}_{path.stem}_{path_digest(path)}_{next(_counter)}"
    try:
        module = load_module(path, f"{package}.{name}" if package else name)
    except Exception as e:  # noqa: BLE001 - any import failure is bad input, named in one line
        raise GateInputError(f"{role} {path} failed to import: {type(e).__name__}: {e}") from None
    if not callable(getattr(module, launcher, None)):
        raise GateInputError(f"{role} {path} has no launcher '{launcher}' (the baseline's entry point)")
    return Impl(role, path, path.read_text(), module, launcher)


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
