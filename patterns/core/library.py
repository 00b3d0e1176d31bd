"""Loading and checking the curated library: one folder per pattern.

    patterns/library/<id>/pattern.yaml   the skeleton (schema: patterns.core.schema.Pattern)
    patterns/library/<id>/before.py      Triton kernel + launcher without the technique
    patterns/library/<id>/after.py       the same op with it
    patterns/library/<id>/reference.py   make_inputs(shape, seed) and reference(**inputs) in plain PyTorch

Every problem is reported as one line `file: field: problem`.
"""
from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import Collection
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import pydantic
import yaml
from pydantic import ValidationError

from patterns.core.facts import FactsError, extract_file, write_atomic
from patterns.core.predicates import PREDICATES, Subject, evaluate
from patterns.core.facts_types import FileFacts
from patterns.core.schema import Pattern, Verdict

LIBRARY_DIR = Path(__file__).parents[1] / "library"
EXAMPLE_FILES = ("before.py", "after.py", "reference.py")


class LibraryError(ValueError):
    """One line: `file: field: problem`."""


@dataclass(frozen=True)
class Entry:
    """A pattern with the folder it came from."""

    pattern: Pattern
    folder: Path

    @property
    def id(self) -> str:
        return self.pattern.id

    def file(self, name: str) -> Path:
        return self.folder / name

    def has_examples(self) -> bool:
        return all(self.file(n).exists() for n in EXAMPLE_FILES)


def library_dir() -> Path:
    """The library folder; PATTERNS_LIBRARY points elsewhere (tests, a user's own library)."""
    return Path(os.environ.get("PATTERNS_LIBRARY", LIBRARY_DIR))


def _field(loc: tuple) -> str:
    return ".".join(str(x) for x in loc) or "(root)"


def load_pattern(path: Path) -> Pattern:
    """Parse and validate one pattern.yaml; raise LibraryError with a one-line message."""
    try:
        # libyaml's C loader when present: the pure-Python one dominates `suggest` start-up
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = f":{mark.line + 1}" if mark else ""
        raise LibraryError(f"{path}{where}: yaml: {exc.problem or exc}") from None
    except (yaml.YAMLError, UnicodeDecodeError, OSError) as exc:
        raise LibraryError(f"{path}: yaml: {str(exc).splitlines()[0]}") from None
    if not isinstance(data, dict):
        raise LibraryError(f"{path}: (root): expected a mapping, got {type(data).__name__}")
    try:
        pattern = Pattern.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = "unknown field"
        elif err["type"] == "missing":
            msg = "missing field"
        more = f" (+{exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        raise LibraryError(f"{path}: {_field(err['loc'])}: {msg}{more}") from None
    if pattern.id != path.parent.name:
        raise LibraryError(f"{path}: id: '{pattern.id}' does not match its folder '{path.parent.name}'")
    return pattern


def load_library(root: Path | None = None) -> list[Entry]:
    """All patterns, sorted by id; the first problem raises LibraryError."""
    from_env = root is None and "PATTERNS_LIBRARY" in os.environ
    root = root or library_dir()
    if not Path(root).is_dir():
        raise LibraryError(f"{root}: library folder not found" + (" (PATTERNS_LIBRARY)" if from_env else ""))
    if from_env and not any(Path(root).glob("*/pattern.yaml")):
        raise LibraryError(f"{root}: no patterns in this library folder (PATTERNS_LIBRARY); an empty library is not a library")
    return list(_load_cached(str(root), _stamp(root)))


def _stamp(root: Path) -> tuple:
    return tuple(sorted((str(p), p.stat().st_mtime_ns) for p in root.glob("*/pattern.yaml")))


@lru_cache(maxsize=4)
def _load_cached(root: str, stamp: tuple) -> tuple[Entry, ...]:
    folders = sorted(p for p in Path(root).iterdir() if p.is_dir() and not p.name.startswith((".", "_")))
    snapshot = _snapshot_file(root, folders)
    if snapshot is not None and snapshot.exists():
        try:
            return _from_snapshot(snapshot.read_text(), folders)
        except Exception:  # corrupt, planted or from other code: validate again
            pass
    entries = _validate_all(folders)
    if snapshot is not None:
        data = [{"folder": str(e.folder), "pattern": e.pattern.model_dump(mode="json", by_alias=True)} for e in entries]
        write_atomic(snapshot, json.dumps({"format": 1, "entries": data}))
        for old in snapshot.parent.glob(snapshot.name.split("-")[0] + "-*"):
            if old != snapshot and old.suffix in (".json", ".pickle"):
                old.unlink(missing_ok=True)
    return entries


def _from_snapshot(text: str, folders: list[Path]) -> tuple[Entry, ...]:
    """A snapshot is data, never code: JSON, each pattern checked by its schema again (fast; the
    slow part of loading is YAML and the checks across files), its folders exactly the library's."""
    data = json.loads(text)
    entries = tuple(Entry(Pattern.model_validate(d["pattern"]), Path(d["folder"])) for d in data["entries"])
    if sorted(str(e.folder) for e in entries) != sorted(str(f) for f in folders):
        raise ValueError("snapshot of another library")
    return entries


def _source_digest() -> str:
    """The schema, predicate and loading sources: read at import, so a process started before
    an edit never takes a snapshot that newer code (say, a new predicate) wrote."""
    h = hashlib.sha256(f"{sorted(PREDICATES)}".encode())
    for module in ("schema.py", "predicates.py", "library.py"):
        h.update(Path(__file__).with_name(module).read_bytes())
    return h.hexdigest()


_SOURCES = _source_digest()


def _code_digest() -> str:
    """What a library snapshot depends on: those sources, and the Python and pydantic that wrote it."""
    return hashlib.sha256(f"{sys.version}\0{pydantic.VERSION}\0{_SOURCES}".encode()).hexdigest()


_CODE = _code_digest()


def validation_code() -> str:
    """Digest of the schema, predicate and loading code this process validates patterns with
    (the same on any Python: what is derived from it, such as the index, travels between machines)."""
    return _SOURCES


def _snapshot_file(root: str, folders: list[Path]) -> Path | None:
    """Where the validated library is kept, named by everything validation depends on.

    Parsing and validating every pattern.yaml dominates the start-up of
    `patterns suggest`; a library already validated with the same pattern
    files, the same schema and predicate code, and the same pydantic is read
    back from a JSON snapshot instead (data, not a pickle: a planted file cannot run code).
    Any change gives a new name, so full validation.
    """
    if os.environ.get("PATTERNS_NO_LIBRARY_CACHE"):
        return None
    h = hashlib.sha256(f"{_CODE}\0{root}".encode())
    for folder in folders:
        try:
            h.update(f"\0{folder.name}\0".encode() + (folder / "pattern.yaml").read_bytes())
        except OSError:
            return None  # a missing pattern.yaml: validation reports it
    from platformdirs import user_cache_dir

    where = Path(os.environ.get("PATTERNS_LIBRARY_CACHE") or Path(user_cache_dir("patterns")) / "library")
    return where / f"{hashlib.sha256(root.encode()).hexdigest()[:12]}-{h.hexdigest()[:32]}.json"


def _validate_all(folders: list[Path]) -> tuple[Entry, ...]:
    entries: dict[str, Entry] = {}
    for folder in folders:
        yaml_path = folder / "pattern.yaml"
        if not yaml_path.exists():
            raise LibraryError(f"{folder}: pattern.yaml: missing file")
        pattern = load_pattern(yaml_path)
        if pattern.id in entries:
            raise LibraryError(f"{yaml_path}: id: duplicate id '{pattern.id}' (also in {entries[pattern.id].folder})")
        entries[pattern.id] = Entry(pattern, folder)
    return tuple(entries[k] for k in sorted(entries))


def get(pattern_id: str, root: Path | None = None) -> Entry:
    for entry in load_library(root):
        if entry.id == pattern_id:
            return entry
    raise LibraryError(f"{library_dir()}: id: unknown pattern '{pattern_id}'")


def present(pattern: Pattern, facts: FileFacts, kernel: str | None = None) -> Verdict:
    """Whether `present_when` holds for a kernel of the file (or any kernel, or the file itself)."""
    subjects = [Subject(facts, k) for k in facts.kernels if kernel in (None, k.name)]
    if kernel is None:
        subjects.append(Subject(facts, None))
    best = Verdict(ok=False)
    for s in subjects:
        v = evaluate(pattern.present_when, s)
        if v.ok:
            return v
        best.reasons.extend(v.reasons)
    return best


def check_entry(entry: Entry, rewrites: Collection[str] | None = None) -> list[str]:
    """Static checks of one pattern folder (no kernels run): one line per problem.

    `rewrites`: the names of the automatic rewrites there are, to check the declared
    one against (the caller asks the rewriter; the core does not import it).
    """
    problems = []
    p = entry.pattern
    if not entry.has_examples():
        missing = [n for n in EXAMPLE_FILES if not entry.file(n).exists()]
        problems.append(f"{entry.folder}: example: missing {', '.join(missing)}")
        return problems
    if p.example is None:
        problems.append(f"{entry.file('pattern.yaml')}: example: missing field")
        return problems
    kernel = p.example.kernel or None
    facts = {}
    for name in ("before.py", "after.py"):
        try:
            facts[name] = extract_file(entry.file(name))
        except FactsError as exc:
            problems.append(str(exc))
    if problems:
        return problems
    for name, want in (("before.py", False), ("after.py", True)):
        v = present(p, facts[name], kernel)
        if v.ok != want:
            state = "holds" if v.ok else "does not hold"
            problems.append(f"{entry.file(name)}: present_when: {state} on {name} ({'; '.join(v.reasons[:2]) or p.present_when.describe()})")
    for name in ("before.py", "after.py"):
        if not any(la.function == p.example.entry for la in facts[name].launches) and p.example.entry not in facts[name].host_functions:
            problems.append(f"{entry.file(name)}: example.entry: no function '{p.example.entry}'")
    if p.transformation.rewrite and rewrites is not None and p.transformation.rewrite not in rewrites:
        problems.append(f"{entry.file('pattern.yaml')}: transformation.rewrite: no rewrite named '{p.transformation.rewrite}'")
    return problems
