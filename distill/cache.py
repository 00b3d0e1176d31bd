"""Facts cache: file sha256 -> facts JSON under the user cache, written atomically.

The key also covers the extractor: the sources of the modules that produce facts
are hashed into the cache folder name, so editing an extractor invalidates it.
"""
from __future__ import annotations

import hashlib
import json
import os
import pickle
import sys
from functools import lru_cache
from pathlib import Path

from patterns.distill.sources import cache_dir

from patterns.core.files import write_atomic

_EXTRACTOR_MODULES = (
    "patterns.core.facts.constants", "patterns.core.facts.kernel", "patterns.core.facts.host", "patterns.core.facts.cache",
    "patterns.distill.pyfacts", "patterns.distill.native",
)


@lru_cache(maxsize=1)
def extractor_key() -> str:
    """The extractors' sources, FileRecord's JSON schema and the parser versions."""
    import importlib
    from importlib import metadata

    from patterns.distill.scan import FileRecord

    h = hashlib.sha256()
    for name in _EXTRACTOR_MODULES:
        mod = importlib.import_module(name)
        h.update(Path(mod.__file__).read_bytes())
    h.update(json.dumps(FileRecord.model_json_schema(), sort_keys=True).encode())
    h.update(f"python={sys.version_info[:2]}".encode())  # the stdlib parser's trees follow the interpreter
    for dist in ("tree-sitter", "tree-sitter-cuda"):
        try:
            h.update(f"{dist}={metadata.version(dist)}".encode())
        except metadata.PackageNotFoundError:
            pass
    return h.hexdigest()[:16]


class FactsCache:
    """Records by content hash; `enabled=False` reads nothing and writes nothing."""

    def __init__(self, root: Path | None = None, enabled: bool = True):
        self.enabled = enabled
        base = root or Path(os.environ.get("PATTERNS_FACTS_CACHE") or cache_dir() / "facts")
        self.root = base / extractor_key()
        self.hits = 0
        self.misses = 0

    def _path(self, sha: str) -> Path:
        return self.root / sha[:2] / f"{sha}.json"

    def get(self, sha: str) -> str | None:
        if not self.enabled:
            return None
        try:
            text = self._path(sha).read_text(encoding="utf-8")
        except OSError:
            self.misses += 1
            return None
        self.hits += 1
        return text

    def put(self, sha: str, text: str) -> None:
        if self.enabled:
            write_atomic(self._path(sha), text, durable=False)  # a cache: rebuilt if a crash loses it

    # archive manifests: archive sha256 -> [(path, sha256, size)] of the members read
    def manifest(self, archive_sha: str) -> dict | None:
        if not self.enabled or not archive_sha:
            return None
        try:
            return json.loads((self.root / "manifests" / f"{archive_sha}.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None

    def put_manifest(self, archive_sha: str, data: dict) -> None:
        if self.enabled and archive_sha:
            write_atomic(self.root / "manifests" / f"{archive_sha}.json", json.dumps(data), durable=False)


def analysis_key(entries) -> str:
    """What a project's detections depend on besides its files: the patterns' conditions and the analysis code."""
    import importlib

    h = hashlib.sha256(extractor_key().encode())
    for e in entries:
        h.update(json.dumps([e.id, e.pattern.present_when.to_yaml()], sort_keys=True, default=str).encode())
    for name in ("patterns.core.predicates", "patterns.distill.link", "patterns.distill.detect", "patterns.distill.discover", "patterns.distill.techniques", "patterns.distill.run"):
        h.update(Path(importlib.import_module(name).__file__).read_bytes())
    return h.hexdigest()[:16]


class AnalysisCache:
    """Per archive: the project's report, detections and discovery items, for a library and code version.

    A rerun over an unchanged wheel with an unchanged library loads one file per
    project and touches no facts at all. Stored with pickle in the user's own
    cache folder (the same trust as the cache itself).
    """

    def __init__(self, facts: FactsCache, key: str):
        self.enabled = facts.enabled
        self.root = facts.root / "analysis" / key

    def get(self, archive_sha: str):
        if not self.enabled or not archive_sha:
            return None
        try:
            with open(self.root / f"{archive_sha}.pickle", "rb") as f:
                return pickle.load(f)
        except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError, TypeError, ValueError):
            return None

    def put(self, archive_sha: str, value) -> None:
        if self.enabled and archive_sha:
            write_atomic(self.root / f"{archive_sha}.pickle", pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL), durable=False)
