"""Golden byte-identity record of every codemod on every Triton source of the repository.

    python -m patterns.rewriter.golden record DIR   # run every codemod, write DIR/golden.json.gz
    python -m patterns.rewriter.golden check DIR    # run them again on the recorded inputs, compare
    python -m patterns.rewriter.golden check DIR split_kv_lse_merge fuse_v_tiles   # only these codemods

The inputs are every tracked .py file of the repository that mentions Triton
or ctypes, every string literal in one that holds a `@triton.jit` kernel or a
ctypes call (the sample kernels of tests and codemods), and the sources the
codemods list as cases. Each codemod runs on each input once with the
kernel `apply` picks and once per kernel of a multi-kernel file, and the
outcome is recorded: the output text, or the refusal's message. The record
keeps the inputs themselves, so `check` proves a refactor of the rewriter
changes no output even after the inputs moved or were edited in the tree.
Exit status of `check`: 0 when every outcome is byte-identical, 1 otherwise.
"""
from __future__ import annotations

import ast
import gzip
import hashlib
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PATH = "kernel.py"  # the name every input is applied under, so messages do not depend on where it lives


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def inputs(root: Path = ROOT) -> dict[str, str]:
    """sha256 -> source of every Triton file and embedded `@triton.jit` string under `root`."""
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "*.py"], cwd=root, capture_output=True,
                           text=True, check=True).stdout.split()
    out: dict[str, str] = {}
    for rel in sorted(files):
        p = root / rel
        if not p.is_file():
            continue
        text = p.read_text(encoding="utf-8", errors="replace")
        if "triton" not in text and "ctypes" not in text:
            continue
        out[_sha(text)] = text
        try:
            tree = ast.parse(text)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and ("@triton.jit" in node.value or "ctypes." in node.value):
                out[_sha(node.value)] = node.value
    return out


def samples() -> dict[str, str]:
    """The sources the codemods list as accepted or refused cases, where they still list them in code."""
    from patterns.rewriter import REWRITES

    out: dict[str, str] = {}
    for cls in REWRITES.values():
        for src in [*getattr(cls, "ACCEPTS", []), *(s for s, _ in getattr(cls, "REFUSES", []))]:
            out[_sha(src)] = src
    return out


def outcomes(sources: dict[str, str], names: set[str] | None = None) -> dict[str, str]:
    """`codemod|input sha|kernel` -> `ok <output>` or `refused <message>` (kernel empty: apply's choice)."""
    from rich.progress import Progress

    from patterns.core.facts import FactsError, extract_source
    from patterns.rewriter import REWRITES
    from patterns.rewriter.base import RewriteError, apply

    out: dict[str, str] = {}
    with Progress(transient=True) as bar:
        names = set(REWRITES) if names is None else names & set(REWRITES)
        task = bar.add_task("codemods × inputs", total=len(sources) * len(names))
        for sha, text in sorted(sources.items()):
            try:
                kernels = [k.name for k in extract_source(text, PATH).kernels]
            except FactsError:
                kernels = []
            for name in sorted(names):
                for kernel in ["", *(kernels if len(kernels) > 1 else [])]:
                    try:
                        got = "ok " + apply(name, text, PATH, kernel=kernel or None).candidate.source
                    except RewriteError as exc:
                        got = f"refused {exc}"
                    except Exception as exc:  # noqa: BLE001 - a codemod bug is an outcome too
                        got = f"crashed {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
                    out[f"{name}|{sha}|{kernel}"] = got
                bar.advance(task)
    return out


def record(folder: Path) -> Path:
    sources = {**inputs(), **samples()}
    folder.mkdir(parents=True, exist_ok=True)
    dest = folder / "golden.json.gz"
    data = {"inputs": sources, "outcomes": outcomes(sources)}
    dest.write_bytes(gzip.compress(json.dumps(data, sort_keys=True).encode()))
    return dest


def check(folder: Path, only: set[str] | None = None) -> list[str]:
    """Keys whose outcome differs from the record (codemods added since are not compared)."""
    data = json.loads(gzip.decompress((folder / "golden.json.gz").read_bytes()))
    names = {k.split("|")[0] for k in data["outcomes"]} & (only or {k.split("|")[0] for k in data["outcomes"]})
    now = outcomes(data["inputs"], names)
    was = {k: v for k, v in data["outcomes"].items() if k.split("|")[0] in names}
    bad = [k for k in sorted(set(was) | set(now)) if was.get(k) != now.get(k)]
    return bad


def main(argv: list[str]) -> int:
    if len(argv) < 2 or argv[0] not in ("record", "check") or (argv[0] == "record" and len(argv) != 2):
        print("usage: python -m patterns.rewriter.golden record DIR | check DIR [CODEMOD ...]", file=sys.stderr)
        return 2
    folder = Path(argv[1])
    if argv[0] == "record":
        dest = record(folder)
        data = json.loads(gzip.decompress(dest.read_bytes()))
        o = data["outcomes"].values()
        print(f"{dest}: {len(data['inputs'])} inputs, {len(o)} outcomes "
              f"({sum(v.startswith('ok ') for v in o)} rewrites, {sum(v.startswith('refused ') for v in o)} refusals, "
              f"{sum(v.startswith('crashed ') for v in o)} crashes)")
        return 0
    if not (folder / "golden.json.gz").is_file():
        print(f"error: {folder}: no golden.json.gz (run `record` first)", file=sys.stderr)
        return 2
    bad = check(folder, set(argv[2:]) or None)
    for k in bad[:40]:
        print(f"differs: {k}")
    print(f"{len(bad)} outcomes differ" if bad else "all outcomes byte-identical")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
