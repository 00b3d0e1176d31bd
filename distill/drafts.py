"""The review path of drafts: where they live, listing them, and promoting one into the library.

Drafts are written to `--drafts DIR` or the user data directory (never the
current directory); the library loader never reads them, so a draft cannot
reach `patterns suggest` until it is promoted. `promote` moves a draft into
`patterns/library/<id>/` only when a person has written its prose (the draft
validates as a Pattern) and runnable before.py / after.py / reference.py sit
in its folder, and the checks of `patterns check --run` pass on it: schema,
example files, present_when on before/after, and the examples against the
reference (in a copy of the library, so a failure changes nothing).
"""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import yaml

from patterns.distill.errors import DistillError
from patterns.core.files import write_atomic
from patterns.core.records import Draft
from patterns.core.schema import Pattern, Status

PROSE_FIELDS = ("summary", "why", "transformation")
EXAMPLE_FILES = ("before.py", "after.py", "reference.py")


def drafts_dir(explicit: Path | None = None) -> Path:
    """--drafts, else PATTERNS_DRAFTS_DIR, else the user data directory."""
    if explicit is not None:
        return explicit
    env = os.environ.get("PATTERNS_DRAFTS_DIR")
    if env:
        return Path(env)
    from platformdirs import user_data_dir

    return Path(user_data_dir("patterns")) / "drafts"


def load_draft(folder: Path, draft_id: str) -> tuple[Path, Draft]:
    path = folder / draft_id / "pattern.yaml"
    if not path.is_file():
        known = sorted(p.parent.name for p in folder.glob("*/pattern.yaml")) if folder.is_dir() else []
        hint = f" (drafts there: {', '.join(known[:6])}{', ...' if len(known) > 6 else ''})" if known else f" ({folder} holds no drafts)"
        raise DistillError(f"draft '{draft_id}': no {path}{hint}")
    return path, read_draft(path)


def read_draft(path: Path) -> Draft:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        return Draft.model_validate(data)
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise DistillError(f"{path}: cannot read: {str(exc).splitlines()[0]}") from None
    except ValueError as exc:
        first = str(exc).splitlines()
        raise DistillError(f"{path}: not a valid draft: {' '.join(first[1:3]) if len(first) > 2 else first[0]}") from None


def list_drafts(folder: Path) -> list[tuple[Path, Draft | None, str]]:
    """(path, draft, problem) for each draft folder, by id; an unreadable one has a problem instead."""
    out = []
    for path in sorted(folder.glob("*/pattern.yaml")) if folder.is_dir() else []:
        try:
            out.append((path, read_draft(path), ""))
        except DistillError as exc:
            out.append((path, None, str(exc)))
    return out


def as_pattern(draft: Draft) -> dict:
    """The pattern.yaml data a promoted draft gets: its Pattern fields, status preview."""
    data = draft.model_dump(mode="json", exclude={"applicability", "signature", "support", "contrast", "notes"}, exclude_none=True)
    data["status"] = Status.preview.value
    data["present_when"] = draft.present_when.to_yaml()
    if draft.applies_when is not None and draft.applies_when.conditions is not None:
        data["applies_when"]["conditions"] = draft.applies_when.conditions.to_yaml()
    return data


def promote(folder: Path, draft_id: str, library: Path, rewrites=None, run_examples: bool = True) -> Path:
    """Move a reviewed draft into `library`/<id>/; DistillError (one line) says what is still missing.

    `rewrites`: the names of the automatic rewrites, for the declared one to be checked (the caller asks the rewriter)."""
    from patterns.core.library import LibraryError, check_entry, load_library

    path, draft = load_draft(folder, draft_id)
    missing = draft.missing()
    if missing:
        raise DistillError(f"draft '{draft_id}': not ready: write {', '.join(missing)} in {path}")
    absent = [n for n in EXAMPLE_FILES if not (path.parent / n).is_file()]
    if absent:
        raise DistillError(f"draft '{draft_id}': not ready: add runnable {', '.join(absent)} to {path.parent}")
    if draft.example is None:
        raise DistillError(f"draft '{draft_id}': not ready: add an `example:` block (entry, shapes) to {path}")
    target = library / draft_id
    if target.exists():
        raise DistillError(f"draft '{draft_id}': {target} already exists")
    data = as_pattern(draft)
    Pattern.model_validate(data)
    text = yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100)
    with tempfile.TemporaryDirectory(prefix="patterns-promote-") as tmp:
        trial = Path(tmp) / "library"
        shutil.copytree(library, trial, ignore=shutil.ignore_patterns("__pycache__", ".*"))
        (trial / draft_id).mkdir()
        (trial / draft_id / "pattern.yaml").write_text(text, encoding="utf-8")
        for n in EXAMPLE_FILES:
            shutil.copy2(path.parent / n, trial / draft_id / n)
        try:
            entries = load_library(trial)
        except LibraryError as exc:
            raise DistillError(f"draft '{draft_id}': the library does not load with it: {exc}") from None
        entry = next(e for e in entries if e.id == draft_id)
        problems = check_entry(entry, rewrites=rewrites)
        if not problems and run_examples and not entry.pattern.example.gpu_only:
            from patterns.core.examples import run_example

            for which in ("before", "after"):
                bad = next((r for r in run_example(entry, which) if not r.passed), None)
                if bad is not None:
                    problems.append(f"{which}.py: example: {bad.shape} seed={bad.seed}: {bad.reason}")
        if problems:
            raise DistillError(f"draft '{draft_id}': check failed: {problems[0]}" + (f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""))
    target.mkdir(parents=True)
    write_atomic(target / "pattern.yaml", text)
    for n in EXAMPLE_FILES:
        shutil.copy2(path.parent / n, target / n)
    shutil.rmtree(path.parent)
    return target
