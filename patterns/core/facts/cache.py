"""Facts of a file, cached by content hash (and by the sources of the files it re-exports names from)."""
from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

from patterns.core.facts.constants import FactsError
from patterns.core.facts_types import FileFacts


def extract_source(source: str, path: str = "<string>", tree=None) -> FileFacts:
    """Facts of Python source text; `tree` is `ast.parse(source)` when the caller has it already."""
    from patterns.core.facts.kernel import parse

    return parse(source, path, tree)


@lru_cache(maxsize=1)
def extractor_digest() -> str:
    """The extractor's own sources: what anything derived from facts must be rebuilt for when they change."""
    import hashlib

    h = hashlib.sha256()
    for mod in sorted(Path(__file__).parent.glob("*.py")):
        h.update(Path(mod).read_bytes())
    h.update(Path(__file__).parents[1].joinpath("facts_types.py").read_bytes())
    return h.hexdigest()


def _cache_key(text: str) -> str:
    """Source hash plus the extractor's own sources: editing the extractor invalidates the cache."""
    import hashlib

    return hashlib.sha256(text.encode() + extractor_digest().encode()).hexdigest()[:32]


def _cache_dir() -> Path | None:
    if os.environ.get("PATTERNS_NO_FACTS_CACHE"):
        return None
    from platformdirs import user_cache_dir

    return Path(os.environ.get("PATTERNS_FACTS_CACHE") or Path(user_cache_dir("patterns")) / "facts")


def extract_file(path: str | Path) -> FileFacts:
    """Facts of a file; cached by content hash, since parsing with positions is the slow part."""
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise FactsError(f"{p}: cannot read: {exc.strerror}") from None
    if b"\0" in raw[:8192]:
        raise FactsError(f"{p}: binary file, not Python source")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FactsError(f"{p}: not UTF-8 text (byte {exc.start})") from None
    cache = _cache_dir()
    entry = cache / f"{_cache_key(text)}.json" if cache else None
    if entry is not None and entry.exists():
        try:
            facts = FileFacts.model_validate_json(entry.read_bytes())
            return _relocate(facts, str(p))
        except ValueError:
            pass  # corrupt or stale entry: extract again
    facts = extract_source(text, str(p))
    if entry is not None:
        write_atomic(entry, facts.model_dump_json().encode())
    return facts


def _relocate(facts: FileFacts, path: str) -> FileFacts:
    """The same source at another path has the same facts but its own path."""
    if facts.path == path:
        return facts
    facts.path = path
    for k in facts.kernels:
        k.path = path
    return facts


def write_atomic(target: Path, data: bytes) -> None:
    """A cache file appears whole or not at all; a read-only cache only costs speed."""
    from patterns.core import files

    try:
        files.write_atomic(target, data, durable=False)
    except OSError:
        pass
