"""Loading an op's baseline and a candidate for the gate (the op itself comes from patterns.core.ops).

A candidate is a file, a rewritten copy of the baseline module, that exposes
the same launcher name. Baseline and candidate are each imported afresh under
their own module name, inside the op's package so that relative imports still
resolve: they never share a JIT cache or a module-level cache with each other
or with an earlier run. They are imported where they run (sandbox.py: the
gate's child process); an `Impl` here is the gate's handle on one of them:
`impl.run(args)` calls it there and leaves the caller's `args` as the call
left them (in-place updates included).
"""
from __future__ import annotations

import ast
import itertools
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from patterns.core.ops import OPS_PACKAGE, OpError, op_package, path_digest, source_path, split_target
from patterns.core.opspec import OpSpec
from patterns.validation.monitor import Observed
from patterns.validation.sandbox import CallError, ChildError

_counter = itertools.count()


class GateInputError(OpError):
    """Bad input to the gate (an unusable candidate, a spec it cannot check): one line, CLI exit 2.
    An unknown op or device is the registry's OpError, which this extends."""


@dataclass
class Impl:
    """A loaded implementation of an op: the baseline or a candidate, and the host it runs in."""

    role: str  # "baseline" | "candidate"
    path: Path
    source: str
    host: Any  # sandbox.Child | sandbox.InProcess
    launcher_name: str

    def run(self, args: dict[str, Any], *, fill: float = math.nan, observe: Observed | None = None, same_tensors: bool = False) -> Any:
        """Call the launcher on `args` (outputs poisoned with `fill`); `args` then hold what the call left.
        `same_tensors`: the previous call's tensors (same data_ptr) with these contents copied in."""
        return self.host.call(self.role, args, fill, observe, same_tensors)

    @property
    def launcher(self) -> Callable[..., Any]:
        """The launcher as a plain callable (what a Partition's `run` is given)."""
        return lambda **args: self.run(args)


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
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except UnicodeDecodeError:
        raise GateInputError(f"candidate {path} is not UTF-8 text (a binary file?)") from None
    except (SyntaxError, ValueError) as e:  # ValueError: null bytes
        where = f"line {e.lineno}: {e.msg}" if isinstance(e, SyntaxError) else str(e)
        raise GateInputError(f"candidate {path} does not parse: {where}") from None
    if launcher not in _top_level_names(tree):
        raise GateInputError(f"candidate {path} has no launcher '{launcher}' (the baseline's entry point)")
    return path


def load_impl(spec: OpSpec, role: str, path: Path, host: Any) -> tuple[Impl, Observed]:
    """Import `path` in `host`; the Impl and what was seen while it was imported.

    A file that fails to import is bad input (GateInputError); a child that dies or
    hangs while importing it raises ChildError (a rejection, with its reason)."""
    _, launcher = split_target(spec.baseline)
    package = op_package(spec, path)
    name = f"_gate_{role}_{path.stem}_{path_digest(path)}_{next(_counter)}"
    try:
        seen = host.load(role, path, f"{package}.{name}" if package else name, launcher, forbidden_imports(spec))
    except CallError as e:
        if str(e).startswith(("SystemExit", "KeyboardInterrupt", "GeneratorExit")):
            raise ChildError("exit", f"the {role} raised {e} while imported (it would end the gate)") from None
        if "no launcher" in str(e):
            raise GateInputError(f"{role} {path} has no launcher '{launcher}' (the baseline's entry point)") from None
        raise GateInputError(f"{role} {path} failed to import: {e}") from None
    except ChildError:
        raise
    except Exception as e:  # noqa: BLE001 - in-process: any import failure is bad input, named in one line
        raise GateInputError(f"{role} {path} failed to import: {type(e).__name__}: {e}") from None
    return Impl(role, path, path.read_text(), host, launcher), seen


def forbidden_imports(spec: OpSpec) -> list[str]:
    """Modules an implementation must not import (the child reports it): the op's reference and spec, the gate."""
    module, _ = split_target(spec.reference)
    names = [f"{OPS_PACKAGE}.{spec.name}.spec", "patterns.validation", "patterns.validation.gate", "patterns.core.compare"]
    if module.endswith(".py"):
        names.append(f"_patterns_op_{path_digest(Path(module))}")
    elif "." in module:
        names.append(module)
    else:
        names.append(f"{OPS_PACKAGE}.{spec.name}.{module}")
    return names


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
