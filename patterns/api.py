"""What the CLI and the MCP server do, once: one plain function per verb.

`patterns.cli` renders these results as tables or prints them as JSON;
`patterns.mcp_server` returns the same data as tool results. Neither entry
point decides anything of its own, so the two cannot drift.

Every function raises the project's one-line user errors (see `user_errors`):
the CLI prints them as `error: MESSAGE` with exit code 2, the server returns
them as tool errors with the same text. Heavy stages (the retriever, the
rewriter, the gate) are imported inside the functions that need them.
"""
from __future__ import annotations

import difflib
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from patterns.core.library import Entry, LibraryError, get, load_library
from patterns.core.records import SuggestReport
from patterns.core.schema import BottleneckClass, Category, Safety, Status


class UsageError(ValueError):
    """Bad input to a command or a tool; one line, exit 2."""


def user_errors() -> tuple[type[BaseException], ...]:
    """Every error whose message is meant for the user as it is (one line naming the file and the problem)."""
    from patterns.agent.journal import JournalError
    from patterns.agent.loop import AgentError
    from patterns.agent.review import ReviewError
    from patterns.catalog import CatalogError
    from patterns.core.facts import FactsError
    from patterns.core.files import FolderError
    from patterns.core.hardware import UnknownGPU
    from patterns.core.ops import OpError
    from patterns.core.user_evidence import EvidenceStoreError
    from patterns.distill.errors import DistillError
    from patterns.retriever.embedding import EmbeddingError
    from patterns.retriever.index import IndexError_
    from patterns.retriever.profile import ProfileError
    from patterns.retriever.retrieve import RetrieveError
    from patterns.rewriter.base import RewriteError
    from patterns.serving.registry import RegistryError

    return (LibraryError, UsageError, DistillError, RegistryError, AgentError, ReviewError, JournalError, RewriteError,
            CatalogError, FolderError, FactsError, RetrieveError, ProfileError, IndexError_, EmbeddingError, UnknownGPU, OpError,
            EvidenceStoreError)


# --------------------------------------------------------------------------------------
# browsing
# --------------------------------------------------------------------------------------


def summary_row(e: Entry) -> dict:
    p = e.pattern
    return {
        "id": p.id,
        "title": p.title,
        "category": p.category.value,
        "status": p.status.value,
        "safety": p.safety.value,
        "bottlenecks": [b.value for b in p.applies_when.bottlenecks],
        "projects": p.projects,
        "rewrite": p.transformation.rewrite,
        "summary": p.summary,
    }


def list_patterns(
    category: Category | None = None,
    bottleneck: BottleneckClass | None = None,
    project: str | None = None,
    safety: Safety | None = None,
    status: Status | None = None,
) -> list[dict]:
    """The library's patterns that pass every given filter, as summary rows."""
    rows = []
    for e in load_library():
        p = e.pattern
        if category and p.category != category:
            continue
        if bottleneck and bottleneck not in p.applies_when.bottlenecks:
            continue
        if project and project not in p.projects:
            continue
        if safety and p.safety != safety:
            continue
        if status and p.status != status:
            continue
        rows.append(summary_row(e))
    return rows


def example_diff(e: Entry) -> str | None:
    """The unified diff of the pattern's before.py → after.py (for a rewrite: what `apply` writes); None without the pair."""
    if not e.has_examples():
        return None
    before = e.file("before.py").read_text(encoding="utf-8").splitlines(keepends=True)
    after = e.file("after.py").read_text(encoding="utf-8").splitlines(keepends=True)
    return "".join(difflib.unified_diff(before, after, f"{e.id}/before.py", f"{e.id}/after.py"))


def refused(e: Entry) -> list[dict]:
    """The rewrite's refuse cases (patterns/library/<id>/cases/): what it leaves alone, and why."""
    from patterns.core.cases import cases

    return [{"case": f"cases/{c.name}.py", "reason": c.reason_text, "note": c.note} for c in cases(e.folder) if c.refuse is not None]


def show_pattern(pattern_id: str) -> dict:
    """One pattern as its schema's JSON, with the before→after diff of its examples under `diff`,
    its rewrite's refuse cases under `refuses`, and the user's own evidence records
    (patterns.core.user_evidence) under `local_evidence`."""
    from patterns.core.user_evidence import records

    e = get(pattern_id)
    local = [r.model_dump(mode="json") for r in records(pattern_id)]
    return {**e.pattern.model_dump(mode="json"), "diff": example_diff(e), "refuses": refused(e), "local_evidence": local}


def _tokens(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


def keyword_scores(query: str, entries: list[Entry]) -> list[tuple[float, Entry]]:
    """Weighted term overlap: title and tags count more than prose."""
    q = set(_tokens(query))
    scored = []
    for e in entries:
        p = e.pattern
        fields = [
            (3.0, p.id.replace("_", " ") + " " + p.title),
            (2.0, " ".join(p.tags) + " " + p.summary),
            (1.0, p.why + " " + p.transformation.method + " " + " ".join(b.value for b in p.applies_when.bottlenecks)),
        ]
        score = 0.0
        for weight, text in fields:
            toks = _tokens(text)
            if toks:
                score += weight * sum(1 for t in q if t in toks) / len(q)
        if score > 0:
            scored.append((score, e))
    return sorted(scored, key=lambda x: -x[0])


def search_patterns(text: str, top: int = 8, keyword: bool = False, chroma_url: str | None = None, progress=None) -> list[dict]:
    """Semantic search (cosine similarity from the index, plus a small bonus for literal keyword hits),
    or keyword matching alone; summary rows with their `score`, best first."""
    if top < 1:
        raise UsageError(f"top: must be at least 1, got {top}")
    entries = load_library()
    kw = keyword_scores(text, entries)
    if keyword:
        results = kw
    else:
        from patterns.retriever.index import similarities

        sims = similarities(text, entries, chroma_url=chroma_url, progress=progress)
        bonus = {e.id: s for s, e in kw}
        top_kw = max(bonus.values(), default=1.0) or 1.0
        results = sorted(((sims.get(e.id, 0.0) + 0.15 * bonus.get(e.id, 0.0) / top_kw, e) for e in entries), key=lambda x: -x[0])
    return [{"score": round(s, 3), **summary_row(e)} for s, e in results[:top]]


# --------------------------------------------------------------------------------------
# retrieval
# --------------------------------------------------------------------------------------


def check_shapes(shapes: dict[str, int]) -> dict[str, int]:
    for name, value in shapes.items():
        if not name.isidentifier():
            raise UsageError(f"shape '{name}': not a variable name")
        if value <= 0:
            raise UsageError(f"shape {name}: must be positive, got {value}")
    return dict(shapes)


def check_dtype(name: str, value: str) -> str:
    from patterns.retriever.estimate import DTYPE_BYTES

    if value not in DTYPE_BYTES:
        raise UsageError(f"{name}: unknown dtype '{value}' (known: {', '.join(sorted(DTYPE_BYTES))})")
    return value


def check_triton(version: str | None) -> str | None:
    if version is None:
        return None
    from packaging.version import InvalidVersion, Version

    try:
        Version(version)
    except InvalidVersion:
        raise UsageError(f"--triton: '{version}' is not a version (e.g. 3.4.0)") from None
    return version


def suggest_report(
    path: Path | None,
    *,
    source: str | None = None,
    kernel: str | None = None,
    shapes: dict[str, int] | None = None,
    dtype: str = "bfloat16",
    dtypes: dict[str, str] | None = None,
    profile: Path | None = None,
    arch: str = "h200",
    top: int = 5,
    chroma_url: str | None = None,
    progress=None,
    inputs: list[str] | dict | None = None,
    triton: str | None = None,
    strict_names: bool = True,
    check_rewrites_: bool | None = None,
) -> SuggestReport:
    """The bottleneck of each kernel of a file (or of `source`, named by `path` or '<source>') and the
    ranked patterns that fit it."""
    from patterns.core.hardware import gpu
    from patterns.retriever.retrieve import suggest

    gpu(arch)  # an unknown arch fails before any work
    shapes = check_shapes(shapes or {})
    check_dtype("dtype", dtype)
    overrides = {name: check_dtype(f"dtype {name}", value) for name, value in (dtypes or {}).items()}
    if top < 1:
        raise UsageError(f"top: must be at least 1, got {top}")
    if source is None:
        if path is None:
            raise UsageError("suggest: give a kernel file or its source text")
        if not Path(path).exists():
            raise UsageError(f"{path}: no such file")
    if profile is not None and not Path(profile).exists():
        raise UsageError(f"{profile}: no such file")
    from patterns.retriever.launcher import InputError, parse_inputs

    try:
        tensors = parse_inputs(list(inputs)) if isinstance(inputs, (list, tuple)) else dict(inputs or {})
    except InputError as exc:
        raise UsageError(str(exc)) from None
    report = suggest(Path(path) if path is not None else Path("<source>"), source=source, kernel=kernel, shapes=shapes, arch=arch,
                     dtype=dtype, dtype_overrides=overrides, profile=profile, top=top, chroma_url=chroma_url,
                     entries=load_library(), progress=progress, inputs=tensors, triton=check_triton(triton), strict_names=strict_names)
    n_rewrites = sum(1 for k in report.kernels for s in k.suggestions if s.rewrite)
    if check_rewrites_ if check_rewrites_ is not None else n_rewrites <= AUTO_CHECKED_REWRITES:
        check_rewrites(report, source if source is not None else Path(path).read_text(encoding="utf-8", errors="replace"))
    return with_local_evidence(report)


def with_local_evidence(report: SuggestReport) -> SuggestReport:
    """The report with each suggestion's `local_measured`: the user's own evidence store, never mixed into `measured`."""
    from patterns.core.user_evidence import records

    mine: dict[str, list] = {}
    for k in report.kernels:
        for s in k.suggestions:
            if s.pattern_id not in mine:
                mine[s.pattern_id] = [r.measurement for r in records(s.pattern_id)]
            s.local_measured = list(mine[s.pattern_id])
    return report


# running a codemod costs about a libcst parse of the whole file (~0.5 s on 500 lines, 2 cores):
# checked by default only while that stays within suggest's time budget
AUTO_CHECKED_REWRITES = 3


def check_rewrites(report: SuggestReport, source: str) -> None:
    """Advertise a rewrite only with its verdict on this kernel: the codemod's own preconditions,
    checked by running it on the text (parsing only, nothing executed); a refusal is kept with its reason."""
    from patterns.rewriter.base import RewriteError, apply

    for k in report.kernels:
        for s in k.suggestions:
            if not s.rewrite:
                continue
            s.rewrite_checked = True
            try:
                apply(s.pattern_id, source, report.file, kernel=None if k.kernel == "<host code>" else k.kernel)
            except RewriteError as exc:
                msg = str(exc).splitlines()[0]
                s.rewrite_refusal = msg.split(": ", 1)[1] if msg.startswith(f"{report.file}: ") else msg
                s.rewrite_refusal = s.rewrite_refusal.removeprefix(f"{s.pattern_id} refused: ")
            except Exception as exc:  # a codemod bug must not take suggest down; say so instead
                s.rewrite_refusal = f"rewrite failed on this file ({type(exc).__name__})"


# --------------------------------------------------------------------------------------
# rewriting
# --------------------------------------------------------------------------------------


def inside(path: Path, root: Path) -> bool:
    """Whether path, with every link and `..` resolved, lies in root."""
    return Path(os.path.realpath(path)).is_relative_to(os.path.realpath(root))


def apply_pattern(
    pattern_id: str,
    path: Path,
    *,
    kernel: str | None = None,
    params: dict[str, str] | None = None,
    write: bool = False,
    root: Path | None = None,
) -> dict:
    """A pattern's automatic rewrite of one file: the diff, and with `write` the file written atomically
    beside a FILE.orig backup (refused if the file changed since it was read, or lies outside `root`).

    An already-applied pattern is no error: `applied` is false and `no_op` says why."""
    from patterns.rewriter.base import AlreadyApplied, apply, write_candidate

    path = Path(path)
    if not path.is_file():
        raise UsageError(f"{path}: no such file")
    if write and root is not None and not inside(path, root):
        raise UsageError(f"{path}: outside the folder this server may write ({root}); refusing to write")
    try:
        source = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise UsageError(f"{path}: not UTF-8 text") from None
    try:
        applied = apply(pattern_id, source, str(path), kernel=kernel, params={k: str(v) for k, v in (params or {}).items()})
    except AlreadyApplied as exc:
        return {"pattern_id": pattern_id, "path": str(path), "applied": False, "no_op": str(exc), "written": False}
    c = applied.candidate
    result = {
        "pattern_id": c.pattern_id,
        "path": str(path),
        "applied": True,
        "kernel": c.kernel,
        "params": c.params,
        "safety": c.safety.value,
        "review": c.safety.review,
        "warnings": list(applied.warnings),
        "diff": c.diff,
        "written": False,
    }
    if write:
        result["backup"] = str(write_candidate(c, path))
        result["written"] = True
    return result


# --------------------------------------------------------------------------------------
# validation
# --------------------------------------------------------------------------------------


def validate_candidate(
    op: str,
    candidate: Path | None = None,
    *,
    out: Path = Path("evidence"),
    device: str = "auto",
    pattern: str | None = None,
    on_stage: Callable[[str], None] | None = None,
) -> dict:
    """The gate on a candidate of an op (an op under kernels/ or a spec.py): the verdict, where the evidence
    bundle was written, and the bundle itself."""
    from patterns.validation.bundle import bundle_stem, verdict
    from patterns.validation.cli import run_gate

    bundle = run_gate(op, candidate, out=out, device=device, pattern=pattern, on_stage=on_stage)
    stem = Path(out) / bundle_stem(bundle)
    return {
        "verdict": verdict(bundle),
        "passed": bundle.passed,
        "evidence": {"json": f"{stem}.json", "markdown": f"{stem}.md"},
        "bundle": bundle.model_dump(mode="json"),
    }


# --------------------------------------------------------------------------------------
# review
# --------------------------------------------------------------------------------------

REVIEW_STATUSES = ("pending", "accepted", "rejected", "all")


def review_store(say: Callable[[str], None] | None = None):
    """The review store, after finishing any accept a crash interrupted (`say` hears of each)."""
    from patterns.agent.review import ReviewStore

    store = ReviewStore()
    for item_id in store.recover():
        if say:
            say(f"finished the interrupted accept of {item_id}")
    return store


def review_items(status: str = "pending", op: str | None = None, say: Callable[[str], None] | None = None) -> list[dict]:
    """The agent's review items with this status (or all) and op, oldest first."""
    from patterns.agent.review import ReviewError

    if status not in REVIEW_STATUSES:
        raise ReviewError(f"--status: '{status}' is not pending, accepted, rejected or all")
    items = review_store(say).list(on_corrupt=say)
    spec = _spec_key(op) if op is not None else None
    return [i.model_dump(mode="json") for i in items if (status == "all" or i.status == status) and (op is None or i.op == op or (spec and i.spec == spec))]


def agent_runs(op: str | None = None, say: Callable[[str], None] | None = None) -> list[dict]:
    """The agent's runs (finished, running, interrupted) with their attempts, oldest first."""
    from patterns.agent.loop import run_status
    from patterns.agent.review import agent_home

    return run_status(agent_home(), op, on_corrupt=say)


def _spec_key(op: str) -> str:
    """The spec path an op argument names (a spec.py or a folder with one), '' for an op name."""
    from patterns.core.ops import spec_path

    path = spec_path(op)
    return str(path.resolve()) if path is not None else ""


def review_item(item_id: str, say: Callable[[str], None] | None = None) -> dict:
    """One review item with its evidence bundle's verdict and checks (`bundle_error` if the bundle is unreadable)."""
    from patterns.validation.bundle import read_bundle, verdict

    item = review_store(say).get(item_id)
    out: dict[str, Any] = item.model_dump(mode="json")
    try:
        bundle = read_bundle(Path(item.bundle))
    except (OSError, ValueError) as exc:
        out["bundle_error"] = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    else:
        out["verdict"] = verdict(bundle)
        out["checks"] = [c.model_dump(mode="json") for c in bundle.checks]
    return out


# --------------------------------------------------------------------------------------
# the user's evidence (patterns.core.user_evidence)
# --------------------------------------------------------------------------------------


def evidence_records(pattern_id: str | None = None) -> list[dict]:
    """The user's own evidence records (all patterns, or one), oldest first per pattern."""
    from patterns.core.user_evidence import all_records, records

    if pattern_id is not None:
        get(pattern_id)  # an unknown id is one line
        found = records(pattern_id)
    else:
        found = all_records()
    return [r.model_dump(mode="json") for r in found]


def evidence_patch(pattern_id: str | None = None, metric: str | None = None) -> tuple[str, list[str]]:
    """A unified diff that appends the user's measurements to the library's pattern.yaml files (for a
    maintainer to review and `git apply` from the checkout's root), and the evidence bundles the records
    cite. Measurements already in the library are left out; nothing is written."""
    from patterns.core.library import LIBRARY_DIR, library_dir, load_pattern
    from patterns.core.user_evidence import all_records, records
    from patterns.distill.merge import append_measured

    found = records(pattern_id) if pattern_id is not None else all_records()
    by_pattern: dict[str, list] = {}
    for r in found:
        if metric is None or r.measurement.metric == metric:
            by_pattern.setdefault(r.pattern_id, []).append(r.measurement)
    # paths as a checkout names them (patterns/library/<id>/pattern.yaml); another library: <folder>/<id>/pattern.yaml
    root = library_dir().resolve()
    base = root.parents[1] if root == LIBRARY_DIR.resolve() else root.parent
    patch, bundles = [], []
    for pid in sorted(by_pattern):
        yaml_path = get(pid).file("pattern.yaml")
        have = load_pattern(yaml_path).evidence.measured
        new = []
        for m in by_pattern[pid]:
            if m not in have and m not in new:
                new.append(m)
        if not new:
            continue
        text = yaml_path.read_text(encoding="utf-8")
        rel = yaml_path.resolve().relative_to(base).as_posix()
        patch += difflib.unified_diff(text.splitlines(True), append_measured(text, new, str(yaml_path)).splitlines(True), f"a/{rel}", f"b/{rel}")
        bundles += [m.source for m in new if m.source]
    return "".join(patch), bundles

