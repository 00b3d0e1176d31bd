"""Reading a source tree into per-file facts records, with the cache and a process pool.

Decisions per file, in order (the report counts each):
  ignored  -- not Python or C++/CUDA, vendored third-party code (cutlass, cute,
              third_party), or Python with no kernel, launcher, registration,
              JIT build or dispatch table (pyfacts.in_scope, a byte test);
  skipped  -- bad input: a link, a path that leaves the tree, larger than 2 MB,
              binary, not UTF-8, or unparseable;
  ok       -- facts extracted (or loaded from the cache by content hash).
"""
from __future__ import annotations

import hashlib
import os
import tarfile
import zipfile
from collections import Counter
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Literal

from pydantic import BaseModel

from patterns.distill.cache import FactsCache
from patterns.distill.errors import DistillError
from patterns.distill.native import NATIVE_SUFFIXES
from patterns.distill.pyfacts import OUT_OF_SCOPE, PyRecord, in_scope, module_name
from patterns.distill.sources import MAX_FILE_BYTES, Source
from patterns.core.facts_types import NativeFileFacts

VENDORED = {"cutlass", "cute", "third_party", "third-party", "thirdparty", "3rdparty", "vendor", "_vendor", "external", "site-packages"}


class FileRecord(BaseModel):
    """Facts of one file (cached by sha256; `path` is rewritten on load)."""

    path: str
    sha256: str
    kind: Literal["python", "native"]
    status: Literal["ok", "skipped"] = "ok"
    reason: str = ""
    py: PyRecord | None = None
    native: NativeFileFacts | None = None
    lines: int = 0

    def relocate(self, path: str) -> FileRecord:
        self.path = path
        if self.py is not None:
            self.py.facts.path = path
            self.py.module = module_name(path)
            for k in self.py.facts.kernels:
                k.path = path
        return self


def file_kind(path: str) -> str | None:
    if path.endswith(".py"):
        return "python"
    if path.endswith(NATIVE_SUFFIXES):
        return "native"
    return None


def vendored(path: str) -> bool:
    return any(part in VENDORED for part in path.split("/")[:-1])


def extract_record(kind: str, path: str, data: bytes, sha: str) -> str:
    """bytes -> FileRecord JSON (what the cache stores). Never raises: bad input becomes a skipped record."""
    return extract_file(kind, path, data, sha).model_dump_json()


_WORKER_CACHE: dict[tuple[str, bool], FactsCache] = {}


def extract_and_cache(kind: str, path: str, data: bytes, sha: str, cache_base: str, enabled: bool) -> str:
    """Worker: extract, write the cache entry here (in parallel with the others), and hand back
    the record's JSON, the cache entry itself: the parent reads it as a warm run reads the cache
    (serialising it once costs less than pickling the record besides)."""
    text = extract_record(kind, path, data, sha)
    cache = _WORKER_CACHE.get((cache_base, enabled))
    if cache is None:
        cache = _WORKER_CACHE[(cache_base, enabled)] = FactsCache(root=Path(cache_base), enabled=enabled)
    cache.put(sha, text)
    return text


def extract_file(kind: str, path: str, data: bytes, sha: str) -> FileRecord:
    """bytes -> FileRecord. Never raises: bad input becomes a skipped record."""
    from patterns.core.facts import FactsError

    def skipped(reason: str) -> FileRecord:
        return FileRecord(path=path, sha256=sha, kind=kind, status="skipped", reason=reason)

    if b"\0" in data[:8192]:
        return skipped("binary")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return skipped("not UTF-8")
    try:
        if kind == "python":
            from patterns.distill.pyfacts import extract_python

            rec = extract_python(text, path)
            return FileRecord(path=path, sha256=sha, kind=kind, py=rec, lines=rec.facts.lines)
        from patterns.distill.native import extract_native

        nat = extract_native(data, path)
        return FileRecord(path=path, sha256=sha, kind=kind, native=nat, lines=text.count("\n") + 1)
    except FactsError:
        return skipped("unparseable")
    except RecursionError:
        return skipped("unparseable")
    except Exception as exc:  # an extractor bug on odd upstream code must not stop the run
        return skipped(f"extractor error ({type(exc).__name__})")


@dataclass
class ScanResult:
    source: Source
    records: list[FileRecord] = field(default_factory=list)
    total: int = 0
    read: int = 0
    cached: int = 0
    extracted: int = 0
    ignored: Counter = field(default_factory=Counter)
    skipped: Counter = field(default_factory=Counter)
    skipped_files: list[tuple[str, str]] = field(default_factory=list)


Progress = Callable[[str, int, int], None]  # (phase, done, total)
Job = tuple[str, str, bytes, str]  # (kind, path, bytes, sha256)


class Workers:
    """One process pool for every source of a run: the next project's files are
    extracted while the previous project is linked and detected in this process."""

    def __init__(self, jobs: int):
        self.jobs = jobs
        self._pool: ProcessPoolExecutor | None = None

    def __enter__(self) -> Workers:
        return self

    def __exit__(self, *exc) -> None:
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)

    def submit(self, pending: list[Job], cache: FactsCache) -> dict[str, Future] | None:
        """sha256 -> future of the record's JSON (cached by the worker); None: too little work for a pool, run it in this process."""
        if self.jobs <= 1 or len(pending) < 8:
            return None
        if self._pool is None:
            import multiprocessing as mp

            ctx = mp.get_context("fork") if "fork" in mp.get_all_start_methods() else None
            self._pool = ProcessPoolExecutor(max_workers=self.jobs, mp_context=ctx)
        biggest_first = sorted(pending, key=lambda j: -len(j[2]))  # better balance at the end
        base = str(cache.root.parent)
        return {job[3]: self._pool.submit(extract_and_cache, *job, base, cache.enabled) for job in biggest_first}


@dataclass
class Plan:
    """A source read and matched against the cache; what is left is being extracted."""

    res: ScanResult
    pending: list[Job]
    by_sha: dict[str, list[str]]  # one extraction per content, however many paths have it
    manifest: dict[str, list]
    futures: dict[str, Future] | None


def plan(source: Source, cache: FactsCache, workers: Workers, progress: Progress | None = None) -> Plan:
    """Read the source, take what the cache has, and hand the rest to the workers."""
    res = ScanResult(source)
    members = source.members()
    res.total = len(members)
    manifest = cache.manifest(source.sha256) or {}
    known: dict[str, list] = manifest.get("files", {})
    new_manifest: dict[str, list] = {}
    pending: list[Job] = []
    by_sha: dict[str, list[str]] = {}

    def skip(path: str, reason: str, sha: str = "") -> None:
        res.skipped[reason] += 1
        res.skipped_files.append((path, reason))
        if sha:
            new_manifest[path] = [sha, "skipped", reason]

    for i, m in enumerate(members):
        if progress and i % 200 == 0:
            progress("read", i, len(members))
        if m.skip:  # links, paths that leave the tree: bad input whatever the file type
            skip(m.path, m.skip)
            continue
        kind = file_kind(m.path)
        if kind is None:
            res.ignored["not Python or C++/CUDA"] += 1
            continue
        if vendored(m.path):
            res.ignored["vendored third-party code"] += 1
            continue
        if m.size > MAX_FILE_BYTES:
            skip(m.path, f"larger than {MAX_FILE_BYTES // 1_000_000} MB")
            continue
        entry = known.get(m.path)
        if entry is not None and entry[1] == "ignored":
            res.ignored[entry[2]] += 1
            new_manifest[m.path] = entry
            continue
        if entry is not None:
            text = cache.get(entry[0])
            if text is not None:
                rec = FileRecord.model_validate_json(text).relocate(m.path)
                res.cached += 1
                _keep(res, rec)
                new_manifest[m.path] = entry
                continue
        try:
            data = m.read()
        except OSError as exc:  # bad input: one line naming the file, the run stops
            raise DistillError(f"{source.origin}/{m.path}: cannot read ({exc.strerror or type(exc).__name__})") from None
        except (KeyError, EOFError, ValueError, zipfile.BadZipFile, tarfile.TarError) as exc:
            raise DistillError(f"{source.origin}: {m.path}: cannot read the archive member ({type(exc).__name__})") from None
        res.read += 1
        sha = hashlib.sha256(data).hexdigest()
        if kind == "python" and not in_scope(data):
            res.ignored[OUT_OF_SCOPE] += 1
            new_manifest[m.path] = [sha, "ignored", OUT_OF_SCOPE]
            continue
        text = cache.get(sha)
        if text is not None:
            rec = FileRecord.model_validate_json(text).relocate(m.path)
            res.cached += 1
            new_manifest[m.path] = [sha, rec.status, rec.reason]
            _keep(res, rec)
            continue
        if sha in by_sha:  # the same content twice in one tree: extract once
            by_sha[sha].append(m.path)
            continue
        by_sha[sha] = [m.path]
        pending.append((kind, m.path, data, sha))

    if progress:
        progress("extract", 0, len(pending))  # queued: the workers may start on it before finish() is called
    return Plan(res, pending, by_sha, new_manifest, workers.submit(pending, cache))


def finish(p: Plan, cache: FactsCache, progress: Progress | None = None) -> ScanResult:
    """Collect the extracted records (cache them, one per path), as the workers deliver them."""
    res, total = p.res, len(p.pending)
    if progress:
        progress("extract", 0, total)
    for i, (kind, path, data, sha) in enumerate(p.pending):  # in tree order, whoever finished first
        if p.futures is not None:
            first = FileRecord.model_validate_json(p.futures[sha].result())
        else:
            text = extract_record(kind, path, data, sha)
            cache.put(sha, text)
            first = FileRecord.model_validate_json(text)
        res.extracted += 1
        for j, path in enumerate(p.by_sha[sha]):
            rec = (first if j == 0 else first.model_copy(deep=True)).relocate(path)
            p.manifest[path] = [sha, rec.status, rec.reason]
            _keep(res, rec)
        if progress:
            progress("extract", i + 1, total)
    if res.source.sha256:
        cache.put_manifest(res.source.sha256, {"files": p.manifest})
    res.records.sort(key=lambda r: r.path)
    return res


def scan(source: Source, cache: FactsCache, jobs: int = 2, progress: Progress | None = None) -> ScanResult:
    with Workers(jobs) as workers:
        return finish(plan(source, cache, workers, progress), cache, progress)


def _keep(res: ScanResult, rec: FileRecord) -> None:
    if rec.status == "skipped":
        res.skipped[rec.reason] += 1
        res.skipped_files.append((rec.path, rec.reason))
    else:
        res.records.append(rec)


def default_jobs() -> int:
    return max(1, min(os.cpu_count() or 1, 8))
