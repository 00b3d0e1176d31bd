"""Kernel facts: what a Python file's Triton kernels and launchers do, with lines.

One extractor (the standard-library AST, patterns.core.ast_facts) serves every stage: the library's
`present_when` checks, the distiller, the retriever and the rewriter. Facts are
deliberately generic (every call site with its arguments, loops, launches) so
that predicates are queries over them rather than one-off AST walks.
"""
from __future__ import annotations

import os
from pathlib import Path

from patterns.core.facts_types import FileFacts

# Aliases upstream code uses for the Triton namespaces; normalised so that a
# predicate can ask for "tl.dot" whatever the file imported.
_MODULE_ALIASES = {
    "triton.language": "tl",
    "triton.language.extra.libdevice": "libdevice",
    "triton.language.extra.cuda.libdevice": "libdevice",
    "triton": "triton",
}
_JIT_DECORATORS = {"triton.jit", "jit", "triton.autotune", "autotune", "triton.heuristics", "heuristics"}
_FLOAT_DTYPES = {"float32", "float16", "bfloat16", "float64", "float8e4nv", "float8e5", "float8e4b15", "fp32", "fp16", "bf16"}


class FactsError(ValueError):
    """A file cannot be analysed (not Python, syntax error). Message is one line."""


def extract_source(source: str, path: str = "<string>") -> FileFacts:
    from patterns.core.ast_facts import parse

    return parse(source, path)


def extractor_digest() -> str:
    """The extractor's own sources and the facts' types: what anything derived from facts must be
    rebuilt for when they change (the pattern schema and the records are not among them)."""
    import hashlib

    h = hashlib.sha256()
    for mod in (__file__, Path(__file__).with_name("ast_facts.py"), Path(__file__).with_name("facts_types.py")):
        h.update(Path(mod).read_bytes())
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
