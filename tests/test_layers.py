"""The layers, enforced: what may import what (README, "How it is built").

    core          patterns/core/           imports only the core
    stages        distill/ retriever/ rewriter/ validation/ serving/ kernels/
                                           import the core and their own package
    entry points  the rest of patterns/    (cli.py, agent/, catalog.py, the MCP
                                           server, the Ray driver) import anything

Every import counts: at module level or inside a function, relative or
absolute, and `importlib.import_module` / `__import__` with a literal name (for
an f-string, its literal head: `f"patterns.kernels.{op}.spec"` imports from
`patterns.kernels`). Where one stage needs another, an entry point composes them.
"""
from __future__ import annotations

import ast
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _roots() -> dict[str, str]:
    """setup.py's folder -> package map (`ROOTS`), read without running setup()."""
    tree = ast.parse((ROOT / "setup.py").read_text())
    node = next(n for n in tree.body if isinstance(n, ast.Assign) and n.targets[0].id == "ROOTS")
    return {folder: package for package, folder in ast.literal_eval(node.value).items()}


ROOTS = _roots()
STAGES = {pkg.split(".")[1] for pkg in ROOTS.values() if pkg != "patterns"}


def layer(module: str) -> str | None:
    """'core', a stage's name, 'entry' for the entry points, None outside the project."""
    parts = module.split(".")
    if parts[0] != "patterns":
        return None
    if len(parts) == 1:
        return "core"  # the namespace package itself: a version string
    if parts[1] == "core":
        return "core"
    return parts[1] if parts[1] in STAGES else "entry"


def allowed(importer: str, imported: str) -> bool:
    src, dst = layer(importer), layer(imported)
    return dst is None or src == "entry" or dst == "core" or src == dst


def project_modules() -> dict[str, Path]:
    """Every Python module the package installs, by dotted name (pattern folders are data)."""
    found = {}
    for folder, package in ROOTS.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            rel = path.relative_to(ROOT / folder).with_suffix("")
            if package == "patterns" and rel.parts[0] == "library":
                continue
            found[".".join([package, *(p for p in rel.parts if p != "__init__")])] = path
    return found


MODULES = project_modules()


def _literal_head(node: ast.expr) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr) and node.values and isinstance(node.values[0], ast.Constant):
        return node.values[0].value.rstrip(".")
    return None


def imports_of(module: str, path: Path) -> list[tuple[int, str]]:
    """(line, imported module) for every import in the file, wherever it stands."""
    is_package = path.name == "__init__.py"
    package = module if is_package else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module
            # `from patterns import serving` imports the sub-package
            found += [(node.lineno, f"{target}.{a.name}") if f"{target}.{a.name}" in MODULES else (node.lineno, target) for a in node.names]
        elif isinstance(node, ast.Call) and node.args:
            fn = node.func
            name = fn.attr if isinstance(fn, ast.Attribute) else fn.id if isinstance(fn, ast.Name) else ""
            head = _literal_head(node.args[0])
            if name in ("import_module", "__import__") and head:
                found.append((node.lineno, head))
    return found


# Known crossings waiting on another change, each with what removes it. The test fails when
# one disappears, so the list cannot outlive its reason.
PENDING: dict[tuple[str, str], str] = {}


def violations() -> dict[tuple[str, str], list[str]]:
    """(importer, imported) -> 'file:line' for every import against the layers."""
    out: dict[tuple[str, str], list[str]] = {}
    for module, path in MODULES.items():
        for line, imported in imports_of(module, path):
            if not allowed(module, imported):
                out.setdefault((module, imported), []).append(f"{path.relative_to(ROOT)}:{line}")
    return out


def test_imports_follow_the_layers():
    found = violations()
    unexpected = [f"{where[0]}: {layer(a)} module {a} imports {b} ({layer(b)})" for (a, b), where in sorted(found.items()) if (a, b) not in PENDING]
    assert unexpected == []
    assert sorted(set(PENDING) - set(found)) == [], "a pending crossing is gone: remove it from PENDING"


def test_the_checker_sees_hidden_imports(tmp_path):
    """The rules and the reader catch what hides: function-level, relative and importlib imports."""
    assert not allowed("patterns.core.predicates", "patterns.distill.native")
    assert not allowed("patterns.validation.overlap", "patterns.serving.trace")
    assert not allowed("patterns.serving.cli", "patterns.agent.review")
    assert allowed("patterns.agent.loop", "patterns.serving.registry")
    assert allowed("patterns.validation.gate", "patterns.core.opspec") and allowed("patterns.core.facts", "yaml")
    src = tmp_path / "m.py"
    src.write_text(
        "import importlib\n"
        "def f(op):\n"
        "    from patterns.serving.trace import Timeline\n"
        "    from ..kernels import common\n"
        "    importlib.import_module(f'patterns.kernels.{op}.spec')\n"
        "    __import__('patterns.rewriter')\n"
    )
    assert [m for _, m in imports_of("patterns.validation.m", src)] == [
        "importlib", "patterns.serving.trace", "patterns.kernels.common", "patterns.kernels", "patterns.rewriter",
    ]


CORE = sorted(m for m in MODULES if layer(m) == "core" and m != "patterns")


def _loaded_outside_core(module: str) -> list[str]:
    probe = (
        f"import sys, {module}\n"
        "print(' '.join(m for m in sys.modules if m.startswith('patterns.') and not m.startswith('patterns.core')))"
    )
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr.strip().splitlines()[-1:]
    return proc.stdout.split()


def test_importing_a_core_module_loads_no_stage():
    """Checked through sys.modules in a fresh interpreter for each core module: what it really loads."""
    with ThreadPoolExecutor(max_workers=2) as pool:
        loaded = dict(zip(CORE, pool.map(_loaded_outside_core, CORE)))
    assert len(CORE) >= 10
    assert {m: mods for m, mods in loaded.items() if mods} == {}


def test_the_probe_sees_a_stage_loaded():
    """The sys.modules probe reports a stage module that an import pulls in."""
    assert "patterns.serving.trace" in _loaded_outside_core("patterns.core.library, patterns.serving.trace")
