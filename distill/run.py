"""The distiller, end to end: sources -> facts -> cross-file links -> detections -> drafts -> report."""
from __future__ import annotations

import gc
import time
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from patterns.distill import discover
from patterns.distill.cache import AnalysisCache, FactsCache, analysis_key
from patterns.distill.detect import Detections, detect
from patterns.distill.link import link
from patterns.distill.scan import ScanResult, Workers, finish, plan
from patterns.distill.sources import Source, resolve
from pydantic import BaseModel, Field

from patterns.core.library import Entry
from patterns.core.records import Draft


class LocationOut(BaseModel):
    pattern: str
    path: str
    symbol: str
    lines: tuple[int, int]
    reason: str = ""


class ProjectReport(BaseModel):
    source: str
    project: str
    version: str
    origin: str
    kind: str
    archive_sha256: str = ""
    files_total: int = 0
    files_read: int = 0
    files_cached: int = 0
    files_extracted: int = 0
    files_scanned: int = Field(0, description="files whose facts were used (python + native)")
    python_files: int = 0
    native_files: int = 0
    kernels: int = Field(0, description="@triton.jit functions")
    launches: int = 0
    native_functions: int = 0
    native_kernels: int = 0
    bindings: int = 0
    links: dict[str, int] = Field(default_factory=dict)
    detections: dict[str, int] = Field(default_factory=dict, description="pattern -> upstream locations")
    ignored: dict[str, int] = Field(default_factory=dict)
    skipped: dict[str, int] = Field(default_factory=dict)
    skipped_files: list[tuple[str, str]] = Field(default_factory=list)
    file_sha256: dict[str, str] = Field(default_factory=dict, description="path -> sha256 of every file scanned")
    seconds: float = 0.0


class DraftOut(BaseModel):
    id: str
    path: str
    title: str
    signature: list[str]
    support: dict[str, int]
    contrast: dict[str, float] = Field(default_factory=dict)
    locations: int = 0
    llm: str = "not configured"
    missing: list[str] = Field(default_factory=list)


class CandidateOut(BaseModel):
    id: str
    scope: str
    support: int
    files: int
    share: float
    dropped: str = ""
    library_overlap: dict[str, float] = Field(default_factory=dict)


class DistillReport(BaseModel):
    projects: list[ProjectReport] = Field(default_factory=list)
    patterns: list[str] = Field(default_factory=list)
    locations: list[LocationOut] = Field(default_factory=list)
    drafts: list[DraftOut] = Field(default_factory=list)
    candidates: list[CandidateOut] = Field(default_factory=list, description="every technique feature: support, contrast, why it is not proposed")
    predicate_errors: dict[str, int] = Field(default_factory=dict)
    written: list[str] = Field(default_factory=list, description="pattern.yaml files changed by --write")
    cache_hits: int = 0
    cache_misses: int = 0
    seconds: float = 0.0


@dataclass
class Distilled:
    report: DistillReport
    detections: Detections
    drafts: list[Draft] = field(default_factory=list)
    scans: list[ScanResult] = field(default_factory=list)
    mined: list = field(default_factory=list)


@contextmanager
def _no_cyclic_gc():
    """The facts are millions of small acyclic objects (syntax trees, records): the cyclic
    collector's passes over them cost about a quarter of a cold run and free nothing, so it
    is off for the run (forked workers inherit that) and restored afterwards."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def distill(
    specs: list[str],
    entries: list[Entry],
    cache: FactsCache,
    jobs: int = 2,
    progress=None,
    min_support: int = 3,
    max_drafts: int = 100,
    cap: int = 5,
    reuse_analysis: bool = True,
) -> Distilled:
    with _no_cyclic_gc():
        return _distill(specs, entries, cache, jobs, progress, min_support, max_drafts, cap, reuse_analysis)


def _distill(specs, entries, cache, jobs, progress, min_support, max_drafts, cap, reuse_analysis) -> Distilled:
    t0 = time.perf_counter()
    report = DistillReport(patterns=[e.id for e in entries])
    det = Detections()
    mined: list[discover.Mined] = []
    scans: list[ScanResult] = []
    analysis = AnalysisCache(cache, analysis_key(entries))
    with Workers(jobs) as workers:
        # every source is read and handed to the workers first; each is then linked and
        # detected in turn while the workers go on with the sources after it
        started = []
        for spec in specs:
            t = time.perf_counter()
            src: Source = resolve(spec)
            cb = progress.callback(f"{src.project} {src.version}") if progress else None
            packed = analysis.get(src.sha256) if reuse_analysis else None
            todo = plan(src, cache, workers, cb) if packed is None else None
            started.append((spec, src, cb, packed, todo, time.perf_counter() - t))
        for spec, src, cb, packed, todo, seconds in started:
            t = time.perf_counter()
            if packed is not None:  # unchanged archive, unchanged library and code: nothing to recompute
                proj, hits, matched, its = packed
                proj = proj.model_copy(update={
                    "source": spec, "origin": src.origin, "seconds": round(seconds + time.perf_counter() - t, 2),
                    "files_read": 0, "files_extracted": 0, "files_cached": proj.files_scanned,
                })
                report.projects.append(proj)
                det.hits += hits
                det.matched |= matched
                mined.append(its)
                cache.hits += proj.files_scanned
                scans.append(ScanResult(src))
                if cb:
                    cb("done (analysis cached)", 1, 1)
                continue
            res = finish(todo, cache, cb)
            scans.append(res)
            if cb:
                cb("link", 0, 1)
            stats = link(res.records)
            if cb:
                cb("detect", 0, 1)
            before = len(det.hits)
            project_det, project_items = analyse(src.project, src.version, res.records, entries, jobs, cb)
            discover.locate(project_items, _reader(src))
            det.hits += project_det.hits
            det.matched |= project_det.matched
            for k, v in project_det.errors.items():
                det.errors[k] += v
            new_hits = det.hits[before:]
            mined.append(project_items)
            if cb:
                cb("done", 1, 1)
            py = [r for r in res.records if r.py is not None]
            nat = [r for r in res.records if r.native is not None]
            report.projects.append(ProjectReport(
                source=spec, project=src.project, version=src.version, origin=src.origin, kind=src.kind, archive_sha256=src.sha256,
                files_total=res.total, files_read=res.read, files_cached=res.cached, files_extracted=res.extracted,
                files_scanned=len(res.records), python_files=len(py), native_files=len(nat),
                kernels=sum(len(r.py.facts.kernels) for r in py),
                launches=sum(len(r.py.facts.launches) for r in py),
                native_functions=sum(len(r.native.functions) for r in nat),
                native_kernels=sum(1 for r in nat for f in r.native.functions if f.is_kernel),
                bindings=sum(len(r.native.bindings) for r in nat),
                links=stats,
                detections=dict(sorted(Counter(h.pattern for h in new_hits).items())),
                ignored=dict(res.ignored), skipped=dict(res.skipped), skipped_files=res.skipped_files,
                file_sha256={r.path: r.sha256 for r in res.records},
                seconds=round(seconds + time.perf_counter() - t, 2),
            ))
            if not project_det.errors:  # a run with predicate errors is not worth keeping
                analysis.put(src.sha256, (report.projects[-1], new_hits, project_det.matched, project_items))
    report.locations = [LocationOut(pattern=h.pattern, path=f"{h.project}:{h.path}", symbol=h.symbol, lines=h.lines, reason=(h.reasons or [""])[0][:160]) for h in det.hits]
    drafts, cands = discover.propose(mined, entries, det, min_support=min_support, max_drafts=max_drafts, cap=cap)
    report.candidates = [CandidateOut(id=c.technique.id, scope=c.technique.scope, support=len(c.locs), files=len({l.path for l in c.locs}),
                                      share=round(c.share, 4), dropped=c.dropped, library_overlap=c.library_overlap) for c in cands]
    report.predicate_errors = dict(det.errors)
    report.cache_hits, report.cache_misses = cache.hits, cache.misses
    report.seconds = round(time.perf_counter() - t0, 2)
    return Distilled(report, det, drafts, scans, mined)


_SHARED: tuple | None = None  # what forked analysis workers read (set just before the fork)


def _analyse_part(bounds: tuple[int, int]) -> tuple[Detections, discover.Mined]:
    project, version, records, entries = _SHARED  # type: ignore[misc]
    part = records[bounds[0]:bounds[1]]
    return detect(project, version, part, entries, Detections()), discover.mine(project, version, part)


def analyse(project: str, version: str, records: list, entries: list[Entry], jobs: int, cb=None) -> tuple[Detections, discover.Mined]:
    """Library detections and technique locations of one project's linked facts.

    Both are per file, so the files are split into contiguous parts evaluated by
    forked workers (they inherit the linked facts; nothing is copied in) and the
    parts joined in order: the result is the same as one pass in this process."""
    global _SHARED
    import multiprocessing as mp

    if cb:
        cb("detect and mine", 0, 1)
    n = len(records)
    if jobs <= 1 or n < 64 or "fork" not in mp.get_all_start_methods():
        return _analyse_whole(project, version, records, entries)
    step = max(1, -(-n // (jobs * 4)))
    bounds = [(a, min(n, a + step)) for a in range(0, n, step)]
    _SHARED = (project, version, records, entries)
    try:
        with mp.get_context("fork").Pool(jobs) as pool:
            parts = pool.map(_analyse_part, bounds, chunksize=1)
    finally:
        _SHARED = None
    det = Detections()
    for d, _ in parts:
        det.hits += d.hits
        det.matched |= d.matched
        det.errors.update(d.errors)
    return det, discover.merge([m for _, m in parts])


def _analyse_whole(project, version, records, entries):
    return detect(project, version, records, entries, Detections()), discover.mine(project, version, records)


def _reader(src: Source):
    """path -> text of one file of the source (for locating a host-level hit), read on demand."""
    members: dict[str, object] = {}

    def read(path: str) -> str:
        if not members:
            members.update({m.path: m for m in src.members()})
        m = members.get(path)
        try:
            return m.read().decode("utf-8", "replace") if m is not None else ""
        except Exception:
            return ""

    return read


def read_excerpt(scans: list[ScanResult], project: str, path: str, lines: tuple[int, int], limit: int = 120) -> str:
    """Source lines of an upstream location, for the LLM prompt."""
    for res in scans:
        if res.source.project != project:
            continue
        for m in res.source.members():
            if m.path == path:
                text = m.read().decode("utf-8", "replace").splitlines()
                a, b = lines
                return "\n".join(text[a - 1:min(b, a - 1 + limit)])
    return ""


def write_drafts(drafts: list[Draft], folder: Path) -> list[Path]:
    """drafts/<id>/pattern.yaml; prose already written there by a person or the LLM is kept."""
    import yaml

    from patterns.core.files import write_atomic

    out = []
    for d in drafts:
        path = folder / d.id / "pattern.yaml"
        if path.exists():
            try:
                old = Draft.model_validate(yaml.safe_load(path.read_text(encoding="utf-8")))
                keep = {k: getattr(old, k) for k in ("summary", "why", "applicability", "traps", "transformation", "references", "example") if getattr(old, k)}
                d = d.model_copy(update=keep)
            except Exception:
                pass  # an unreadable old draft is replaced
        data = d.model_dump(mode="json", exclude_none=True)
        data["present_when"] = d.present_when.to_yaml()
        head = (f"# Draft proposed by `patterns distill`: an upstream technique the library does not have.\n"
                f"# Write the prose ({', '.join(d.missing()) or 'done'}), add runnable before.py/after.py/reference.py and an\n"
                f"# `example:` block beside this file, then run `patterns drafts promote {d.id}`.\n")
        write_atomic(path, head + yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100))
        out.append(path)
    return out
