"""Detection as data: every library pattern's `present_when`, run over all upstream facts.

Subjects are what patterns.core.library.present() evaluates -- each kernel of a
Python file, and the file itself -- plus, for native files, each C++/CUDA
function alone (so a hit names the function) and then the whole file. A hit
becomes an UpstreamLocation: project, version, path, symbol and the lines the
symbol's span (a kernel or function; the note names the matched lines), or for
file-level hits the span of the lines the verdict points at.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from time import perf_counter

from patterns.distill.scan import FileRecord
from patterns.core.library import Entry
from patterns.core.predicates import PREDICATES, Subject
from patterns.core.facts_types import FileFacts, NativeFileFacts
from patterns.core.schema import Condition, UpstreamLocation, Verdict

KNOWN_PROJECTS = ("sglang", "fla", "deepgemm", "deepep")


@dataclass
class Hit:
    pattern: str
    project: str
    version: str
    path: str
    symbol: str
    lines: tuple[int, int]
    sha256: str
    reasons: list[str]
    kernel: bool  # attributed to a kernel/function (not the file)
    strength: int  # matched lines: more is more representative

    def location(self, note_prefix: str = "found by distill") -> UpstreamLocation | None:
        if self.project not in KNOWN_PROJECTS:
            return None
        reason = self.reasons[0] if self.reasons else ""
        return UpstreamLocation(
            project=self.project, version=self.version, path=self.path, symbol=self.symbol, lines=self.lines,
            note=f"{note_prefix}: {reason}"[:200], sha256=self.sha256,
        )


@dataclass
class Detections:
    hits: list[Hit] = field(default_factory=list)
    errors: Counter = field(default_factory=Counter)  # pattern -> predicate exceptions
    matched: set[tuple[str, str, str]] = field(default_factory=set)  # (project, path, symbol) matched by any pattern

    def count(self, pattern: str, project: str) -> int:
        return sum(1 for h in self.hits if h.pattern == pattern and h.project == project)


def _span(lines: list[int], lo: int, hi: int) -> tuple[int, int] | None:
    inside = [ln for ln in lines if lo <= ln <= hi]
    return (min(inside), max(inside)) if inside else None


def _enclosing(symbols, line: int) -> str:
    for s in symbols:
        if s.line <= line <= s.end_line:
            return s.name
    return "<module>"


_NO = Verdict(ok=False)


class _Node:
    """A condition compiled for holds(): its predicate call as a hashable key, and its children in
    the order that has decided it cheapest so far (measured on the subjects already seen)."""

    __slots__ = ("cond", "op", "key", "spec", "args", "written", "children", "seconds", "runs", "decided", "next_sort")

    def __init__(self, cond: Condition):
        self.cond, self.op = cond, cond.op
        self.key = (cond.predicate, repr(sorted(cond.args.items()))) if cond.op == "pred" else None
        self.spec = PREDICATES[cond.predicate] if cond.op == "pred" else None
        self.args = cond.args
        self.written = tuple(_node(c) for c in cond.children)  # as the pattern writes them: verdicts join in this order
        self.children = list(self.written)
        self.seconds, self.runs, self.decided, self.next_sort = 0.0, 0, 0, 16

    def rank(self, stop_on: bool) -> float:
        """Expected seconds per subject that decides the parent (`stop_on`: the answer that stops it)."""
        if not self.runs:
            return 0.0
        share = (self.decided if stop_on else self.runs - self.decided) / self.runs
        return (self.seconds / self.runs) / max(share, 1e-3)


_NODES: dict[int, _Node] = {}


def _node(cond: Condition) -> _Node:
    n = _NODES.get(id(cond))
    if n is None or n.cond is not cond:
        n = _NODES[id(cond)] = _Node(cond)
    return n


def holds(cond: Condition, subject: Subject, memo: dict) -> bool:
    """Whether `cond` holds on `subject`: evaluate()'s `ok`, without its lines and reasons.

    Most conditions fail on most upstream subjects, and a failing verdict's lines
    and reasons are never used, so `all` stops at the first child that fails and
    `any` at the first that holds, trying first the children that have decided it
    most cheaply so far; `memo` keeps each predicate call's answer for the subject,
    since many conditions ask the same question of it. Predicates are pure
    functions of the facts, so the answer is evaluate(cond, subject).ok in any
    order whenever evaluate returns (a predicate it skips cannot raise)."""
    return _holds(_node(cond), subject, memo)


def _holds(n: _Node, subject: Subject, memo: dict) -> bool:
    t = perf_counter()
    op = n.op
    if op == "pred":
        ok = _call(n, subject, memo).ok
    elif op == "not":
        ok = not _holds(n.children[0], subject, memo)
    else:
        stop = op == "any"  # all: stops at the first False; any: at the first True
        ok = not stop
        for c in n.children:
            if _holds(c, subject, memo) is stop:
                ok = stop
                break
    n.runs += 1
    n.seconds += perf_counter() - t
    n.decided += ok
    if n.runs == n.next_sort and len(n.children) > 1:
        n.next_sort *= 4
        stop = op == "any"
        n.children.sort(key=lambda c: c.rank(stop))
    return ok


_NO_KERNEL: dict[str, Verdict] = {}


def _call(n: _Node, subject: Subject, memo: dict) -> Verdict:
    """The predicate's verdict on the subject, computed once per subject."""
    v = memo.get(n.key)
    if v is None:
        spec = n.spec
        if spec.scope == "kernel" and subject.kernel is None:  # as evaluate() answers it
            v = _NO_KERNEL.get(spec.name) or _NO_KERNEL.setdefault(spec.name, Verdict(ok=False, reasons=[f"{spec.name}: no kernel"]))
        else:
            v = spec.func(subject, **n.args)
        memo[n.key] = v
    return v


def _verdict(n: _Node, subject: Subject, memo: dict) -> Verdict:
    """patterns.core.predicates.evaluate(n.cond, subject), from the predicate verdicts in `memo`."""
    if n.op == "pred":
        return _call(n, subject, memo)
    if n.op == "not":
        inner = _verdict(n.written[0], subject, memo)
        reasons = inner.reasons if not inner.ok and inner.reasons else [f"not {n.cond.children[0].describe()}"]
        return Verdict(ok=not inner.ok, reasons=reasons)
    results = [_verdict(c, subject, memo) for c in n.written]
    ok = all(r.ok for r in results) if n.op == "all" else any(r.ok for r in results)
    held = [r for r in results if r.ok]
    return Verdict(ok=ok, lines=sorted({ln for r in held for ln in r.lines}), reasons=[reason for r in held for reason in r.reasons])


def check(cond: Condition, subject: Subject, memo: dict) -> Verdict:
    """evaluate(cond, subject), evaluated in full only where the condition holds (holds() first)."""
    n = _node(cond)
    return _verdict(n, subject, memo) if _holds(n, subject, memo) else _NO


def _safe(entry: Entry, subject: Subject, errors: Counter, memo: dict | None = None) -> Verdict:
    try:
        return check(entry.pattern.present_when, subject, {} if memo is None else memo)
    except Exception:  # a predicate that trips on unusual upstream facts must not stop the run
        errors[entry.id] += 1
        return _NO


def detect(project: str, version: str, records: list[FileRecord], entries: list[Entry], out: Detections | None = None) -> Detections:
    out = out or Detections()
    for rec in records:
        if rec.py is not None:
            _detect_python(project, version, rec, entries, out)
        elif rec.native is not None:
            _detect_native(project, version, rec, entries, out)
    return out


def _detect_python(project: str, version: str, rec: FileRecord, entries: list[Entry], out: Detections) -> None:
    facts = rec.py.facts
    # a kernel's span starts at its first decorator (autotune configs, heuristics live there)
    starts = {s.name: s.line for s in rec.py.symbols}
    for k in facts.kernels:
        if k.autotune is not None:
            starts[k.name] = min(starts.get(k.name, k.line), k.autotune.line)
    kernels = [(k, Subject(facts, k), {}) for k in facts.kernels]  # a memo per subject, shared by every pattern
    whole, whole_memo = Subject(facts, None), {}
    for e in entries:
        file_lines: list[int] = []
        file_reasons: list[str] = []
        file_ok = False
        for k, subject, memo in kernels:
            v = _safe(e, subject, out.errors, memo)
            if not v.ok:
                continue
            span = _span(v.lines, starts.get(k.name, k.line), k.end_line)
            if span is None and v.lines:  # held through host facts only: a file-level hit
                file_ok, file_lines, file_reasons = True, v.lines, v.reasons
                continue
            out.hits.append(Hit(e.id, project, version, rec.path, k.name, (starts.get(k.name, k.line), k.end_line), rec.sha256, v.reasons, True, len(v.lines)))
            out.matched.add((project, rec.path, k.name))
        v = _safe(e, whole, out.errors, whole_memo)
        if v.ok:
            file_ok, file_lines, file_reasons = True, v.lines or file_lines, v.reasons or file_reasons
        if file_ok:
            lines = file_lines or [1]
            symbol = _enclosing(rec.py.symbols, min(lines))
            out.hits.append(Hit(e.id, project, version, rec.path, symbol, (min(lines), max(lines)), rec.sha256, file_reasons, False, len(file_lines)))


def _view(facts: FileFacts, nat: NativeFileFacts, fn) -> FileFacts:
    sub = NativeFileFacts(
        language=nat.language, functions=[fn], includes=nat.includes,
        bindings=[b for b in nat.bindings if fn.line <= b.line <= fn.end_line],
    )
    return facts.model_copy(update={"native": sub})


def _detect_native(project: str, version: str, rec: FileRecord, entries: list[Entry], out: Detections) -> None:
    nat = rec.native
    whole = FileFacts(path=rec.path, lines=rec.lines, native=nat)
    views = [(fn, Subject(_view(whole, nat, fn), None), {}) for fn in nat.functions
             if fn.constructs or fn.is_kernel or any(fn.line <= b.line <= fn.end_line for b in nat.bindings)]
    file_subject, file_memo = Subject(whole, None), {}
    for e in entries:
        v = _safe(e, file_subject, out.errors, file_memo)
        if not v.ok:
            continue
        attributed = False
        for fn, view, memo in views:
            fv = _safe(e, view, out.errors, memo)
            if fv.ok:
                out.hits.append(Hit(e.id, project, version, rec.path, fn.name, (fn.line, fn.end_line), rec.sha256, fv.reasons, True, len(fv.lines)))
                out.matched.add((project, rec.path, fn.name))
                attributed = True
        if not attributed:
            lines = v.lines or [1]
            owner = next((fn.name for fn in nat.functions if fn.line <= min(lines) <= fn.end_line), "<file>")
            out.hits.append(Hit(e.id, project, version, rec.path, owner, (min(lines), max(lines)), rec.sha256, v.reasons, False, len(v.lines)))


def representative(hits: list[Hit], cap: int) -> list[Hit]:
    """Up to `cap` hits: kernels before file-level hits, one per file first, strongest first."""
    ordered = sorted(hits, key=lambda h: (not h.kernel, -h.strength, h.path, h.lines[0]))
    picked, paths = [], set()
    for h in ordered:
        if h.path not in paths:
            picked.append(h)
            paths.add(h.path)
        if len(picked) == cap:
            return picked
    for h in ordered:
        if h not in picked:
            picked.append(h)
        if len(picked) == cap:
            break
    return picked
