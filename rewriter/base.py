"""What every automatic rewrite is, and the one function that applies one.

A rewrite is a libcst codemod on `edits.PlannedCodemod` (one file per rewrite in rewriter/codemods/,
named after the pattern it applies) that edits kernel body, decorators and
launcher together. `apply` is where the decisions around it live:

- a pattern whose `present_when` already holds is a reported no-op;
- the codemod refuses unsupported cases with `SkipFile(reason)` — never a
  half-edit;
- the result must parse, must now satisfy `present_when`, and must touch only
  what the codemod changed (libcst keeps comments and formatting elsewhere
  byte for byte);
- the output is a Candidate: the new source and a unified diff.
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from libcst.codemod import CodemodContext, TransformFailure, TransformSkip, TransformSuccess, transform_module

from patterns.core.facts import FactsError, extract_source
from patterns.core.files import sha256_hex, write_atomic
from patterns.core.library import Entry, get, present
from patterns.core.facts_types import FileFacts, KernelFacts
from patterns.core.records import Candidate


class RewriteError(ValueError):
    """A rewrite cannot be applied; one line naming the file and the reason."""


class AlreadyApplied(RewriteError):
    """The kernel already applies the pattern: nothing to do."""


@dataclass
class Applied:
    candidate: Candidate
    entry: Entry
    warnings: list[str]


def _coerce(entry: Entry, params: dict[str, str]) -> dict[str, Any]:
    spec = entry.pattern.transformation.params
    out: dict[str, Any] = {name: p.default for name, p in spec.items()}
    for name, raw in params.items():
        if name not in spec:
            known = ", ".join(spec) or "none"
            raise RewriteError(f"--param {name}: unknown parameter of {entry.id} (parameters: {known})")
        p = spec[name]
        try:
            value: Any = {"int": int, "float": float, "str": str, "bool": lambda s: {"true": True, "false": False}[s.lower()]}[p.type](raw)
        except (ValueError, KeyError):
            raise RewriteError(f"--param {name}: '{raw}' is not a {p.type}") from None
        if p.choices and value not in p.choices:
            raise RewriteError(f"--param {name}: '{raw}' not one of {', '.join(map(str, p.choices))}")
        out[name] = value
    return out


def pick_kernel(facts: FileFacts, path: str, kernel: str | None, entry: Entry) -> KernelFacts | None:
    """The kernel to rewrite: the named one, or the only one the pattern applies to."""
    from patterns.core.predicates import Subject, evaluate

    if kernel is not None:
        k = facts.kernel(kernel)
        if k is None:
            known = ", ".join(x.name for x in facts.kernels) or "none"
            raise RewriteError(f"{path}: --kernel: no kernel named '{kernel}' (kernels: {known})")
        return k
    if not facts.kernels:
        return None
    cond = entry.pattern.applies_when.conditions
    fits = [k for k in facts.kernels if cond is None or evaluate(cond, Subject(facts, k)).ok]
    if len(fits) == 1:
        return fits[0]
    if len(facts.kernels) == 1:
        return facts.kernels[0]
    if not fits:
        # nothing left to rewrite: the kernel that already has the pattern is reported as such by apply()
        applied = [k for k in facts.kernels if evaluate(entry.pattern.present_when, Subject(facts, k)).ok]
        if len(applied) == 1:
            return applied[0]
    names = ", ".join(k.name for k in (fits or facts.kernels))
    raise RewriteError(f"{path}: several kernels could take {entry.id} ({names}): choose one with --kernel")


def apply(pattern_id: str, source: str, path: str = "<string>", kernel: str | None = None, params: dict[str, str] | None = None) -> Applied:
    from patterns.rewriter import REWRITES

    entry = get(pattern_id)
    name = entry.pattern.transformation.rewrite
    if not name:
        raise RewriteError(
            f"{entry.id}: no automatic rewrite; apply it by hand — see `patterns show {entry.id}` (transformation: {entry.pattern.transformation.method[:80]}…)"
        )
    codemod_cls = REWRITES.get(name)
    if codemod_cls is None:
        raise RewriteError(f"{entry.id}: transformation.rewrite names '{name}', which is not installed")
    try:
        facts = extract_source(source, path)
    except FactsError as exc:
        raise RewriteError(str(exc)) from None
    target = pick_kernel(facts, path, kernel, entry)
    verdict = present(entry.pattern, facts, target.name if target else None)
    if verdict.ok:
        raise AlreadyApplied(f"{path}: {entry.id} is already applied ({'; '.join(verdict.reasons[:2])}): nothing to do")
    values = _coerce(entry, params or {})
    context = CodemodContext(filename=path)
    codemod = codemod_cls(context, facts, target, values)
    result = transform_module(codemod, source)
    if isinstance(result, TransformSkip):
        raise RewriteError(f"{path}: {entry.id} refused: {result.skip_description or result.skip_reason}")
    if isinstance(result, TransformFailure):
        raise RewriteError(f"{path}: {entry.id} failed: {str(result.error).splitlines()[0]}")
    assert isinstance(result, TransformSuccess)
    new = result.code
    if new == source:
        raise RewriteError(f"{path}: {entry.id} found nothing to change")
    try:
        new_facts = extract_source(new, path)
    except FactsError as exc:  # a codemod bug, never shown as success
        raise RewriteError(f"{path}: {entry.id} produced invalid code: {exc}") from None
    after = present(entry.pattern, new_facts, target.name if target else None)
    if not after.ok:
        raise RewriteError(f"{path}: {entry.id} rewrite did not establish present_when ({'; '.join(after.reasons[:2])})")
    diff = "".join(difflib.unified_diff(source.splitlines(keepends=True), new.splitlines(keepends=True), f"a/{Path(path).name}", f"b/{Path(path).name}"))
    candidate = Candidate(
        pattern_id=entry.id, path=path, kernel=target.name if target else "", params=values, diff=diff, source=new,
        original_sha256=sha256_hex(source), safety=entry.pattern.safety,
    )
    return Applied(candidate, entry, list(context.warnings))


def write_candidate(candidate: Candidate, path: Path) -> Path:
    """Write atomically, keeping a backup; refuse if the file changed since it was analysed.

    The check and the write happen under an exclusive lock on the file itself, so of two
    writers in that window the second finds the first's rewrite and refuses (no lost
    rewrite). An existing FILE.orig is never overwritten: it holds the file as it was
    before the first rewrite, which a second apply must not lose."""
    import fcntl
    import shutil

    with open(path, "rb") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        try:
            current = path.read_text(encoding="utf-8")
            if sha256_hex(current) != candidate.original_sha256:
                raise RewriteError(f"{path}: changed since it was analysed; run apply again")
            backup = path.with_name(path.name + ".orig")
            if not backup.exists():
                shutil.copy2(path, backup)
            write_atomic(path, candidate.source, keep_mode=True)
        finally:
            fcntl.flock(held, fcntl.LOCK_UN)
    return backup
