"""A rewrite's cases: kernels it must rewrite to an expected file, and kernels it must refuse.

They live beside the pattern (the Semgrep/Fixit layout), never in the codemod:

    patterns/library/<id>/cases/<name>.py        a kernel
    patterns/library/<id>/cases/<name>.fixed.py  beside it: the case is accepted, and this is
                                                 exactly what `apply` writes
    patterns/library/_cases/<name>.py            a kernel the cases of several patterns share:
                                                 a pattern's `cases/<name>.fixed.py` with no
                                                 `<name>.py` beside it rewrites this one

A case's header (its first comment lines) says what else is expected:

    # refuse: <regular expression the refusal's reason must match>
    # kernel: <the kernel to rewrite, where the file has several>
    # params: name=value, name=value
    # run: <launcher> <arg>=<dtype>[<dims>] ... <arg>=<number>

`refuse` makes it a refuse case (no `.fixed.py` then). `run` makes an accept
case a reference run as well: the launcher is called with random tensors of
those shapes (float dtypes: standard normal; int dtypes `int32[8]<64`: in
[0, 64)) on the case and on its `.fixed.py`, and the outputs must agree within
the pattern's example tolerance.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

HEADER = re.compile(r"#\s*(refuse|kernel|params|run):\s*(.*?)\s*$")
SHARED = "_cases"


class CaseError(ValueError):
    """A case file is malformed; one line naming the file."""


@dataclass
class Case:
    pattern: str
    name: str
    path: Path  # the input kernel
    fixed: Path | None  # accept cases: the expected output
    refuse: str | None  # refuse cases: the reason's regular expression
    kernel: str | None = None
    params: dict[str, str] = field(default_factory=dict)
    run: str | None = None
    note: str = ""  # the comment lines of the header that are not `key: value`: what the case is

    @property
    def id(self) -> str:
        return f"{self.pattern}/{self.name}"

    @property
    def reason_text(self) -> str:
        """The refusal's reason as prose: the regular expression without its escapes."""
        return re.sub(r"\\([^\w\s])", r"\1", self.refuse or "")

    def source(self) -> str:
        return self.path.read_text(encoding="utf-8")


def header(text: str, path: Path) -> dict[str, str]:
    """The `# key: value` lines a case starts with; the other comment lines there under "note"."""
    out: dict[str, str] = {}
    note = []
    for line in text.splitlines():
        if not line.startswith("#"):
            break
        hit = HEADER.match(line)
        if hit:
            if hit.group(1) in out:
                raise CaseError(f"{path}: header '{hit.group(1)}' given twice")
            out[hit.group(1)] = hit.group(2)
        else:
            note.append(line.lstrip("#").strip())
    return {**out, "note": " ".join(note)} if note else out


def _params(text: str, path: Path) -> dict[str, str]:
    out = {}
    for item in filter(None, (s.strip() for s in text.split(","))):
        name, eq, value = item.partition("=")
        if not eq:
            raise CaseError(f"{path}: params: '{item}' is not name=value")
        out[name.strip()] = value.strip()
    return out


def cases(folder: Path) -> list[Case]:
    """The cases of one pattern folder, sorted by name."""
    pattern = folder.name
    where = folder / "cases"
    if not where.is_dir():
        return []
    shared = folder.parent / SHARED
    out = []
    names = {p.name[: -len(".fixed.py")] if p.name.endswith(".fixed.py") else p.stem for p in where.glob("*.py")}
    for name in sorted(names):
        src, fixed = where / f"{name}.py", where / f"{name}.fixed.py"
        if not src.exists():
            src = shared / f"{name}.py"
            if not src.exists():
                raise CaseError(f"{fixed}: no {name}.py beside it or in library/{SHARED}/")
        head = header(src.read_text(encoding="utf-8"), src)
        refuse = head.get("refuse")
        if refuse is not None and src.parent != where:
            raise CaseError(f"{src}: a shared case cannot refuse: give the pattern its own copy")
        if (refuse is None) == (not fixed.exists()):
            what = "has both a refuse header and a .fixed.py" if refuse is not None else "has neither a refuse header nor a .fixed.py"
            raise CaseError(f"{src}: {what}")
        out.append(Case(pattern, name, src, fixed if fixed.exists() else None, refuse, head.get("kernel"),
                        _params(head.get("params", ""), src), head.get("run"), head.get("note", "")))
    return out


RUN_ARG = re.compile(r"(\w+)=(?:(\w+)\[([\d,\s]*)\](?:<(\d+))?|(-?[\d.]+(?:e-?\d+)?))$")


def run_call(case: Case, seed: int = 0, device: str = "cpu") -> tuple[str, dict]:
    """The launcher a case's `# run:` header names, and its inputs: random tensors and numbers."""
    import torch

    entry, *args = case.run.split()  # type: ignore[union-attr]
    gen = torch.Generator().manual_seed(seed)
    inputs: dict = {}
    for text in " ".join(args).replace(", ", ",").split():
        hit = RUN_ARG.match(text)
        if hit is None:
            raise CaseError(f"{case.path}: run: '{text}' is not name=dtype[dims], name=int32[dims]<high or name=number")
        name, dtype, dims, high, number = hit.groups()
        if number is not None:
            inputs[name] = float(number) if any(c in number for c in ".e") else int(number)
            continue
        shape = [int(d) for d in dims.split(",") if d.strip()]
        dt = getattr(torch, dtype, None)
        if not isinstance(dt, torch.dtype):
            raise CaseError(f"{case.path}: run: '{dtype}' is not a torch dtype")
        if dt.is_floating_point:
            inputs[name] = torch.randn(shape, generator=gen).to(dt).to(device)
        else:
            inputs[name] = torch.randint(0, int(high or 2), shape, generator=gen).to(dt).to(device)
    return entry, inputs
