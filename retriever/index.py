"""The library's embedding index in ChromaDB (embedded by default, or a server).

`patterns index` embeds each pattern's text with all-MiniLM-L6-v2 and upserts
it into a ChromaDB collection, incrementally: a pattern whose content hash is
unchanged is not re-embedded, a removed pattern is deleted.

Beside the embedded collection the build writes `snapshot.json` (ids, content
hashes, generality, float32 embeddings exported from the collection).
`patterns suggest` reads the snapshot on its hot path, in plain Python:
importing chromadb costs ~1.7 s and numpy ~0.1 s here, and a few hundred dot
products of 384 floats cost less than either. The snapshot is used only while
every hash matches the library, otherwise the index is rebuilt from ChromaDB.
Query embeddings are cached by text, so numpy and the encoder load only for a
kernel description not seen before. With `--chroma-url` the server is queried
directly.
"""
from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
from array import array
from dataclasses import dataclass
from operator import mul
from pathlib import Path
from urllib.parse import urlparse

from patterns.core.facts import write_atomic
from patterns.core.library import Entry

COLLECTION = "patterns"


class IndexError_(RuntimeError):
    """The index cannot be used or built; one line."""


def default_index_dir() -> Path:
    """PATTERNS_INDEX_DIR, else one index per library folder in the user cache: two checkouts, or the
    installed library and a user's own (PATTERNS_LIBRARY), never rebuild each other's index."""
    if "PATTERNS_INDEX_DIR" in os.environ:
        return Path(os.environ["PATTERNS_INDEX_DIR"])
    from platformdirs import user_cache_dir

    from patterns.core.library import library_dir

    root = hashlib.sha256(str(library_dir().resolve()).encode()).hexdigest()[:12]
    return Path(user_cache_dir("patterns")) / "index" / root


def content_hash(entry: Entry) -> str:
    """Changes when anything the index derives from a pattern changes: its text, its conditions, its example."""
    h = hashlib.sha256(entry.id.encode())
    for name in ("pattern.yaml", "before.py"):
        f = entry.file(name)
        h.update(f.read_bytes() if f.exists() else b"")
    return h.hexdigest()[:16]


@dataclass
class IndexStats:
    added: int
    updated: int
    removed: int
    unchanged: int
    where: str


def _client(chroma_url: str | None, path: Path):
    os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
    try:
        import chromadb
        from chromadb.config import Settings
    except ImportError:
        raise IndexError_(f"{path}: the index must be built, and chromadb is not installed (pip install chromadb)") from None

    settings = Settings(anonymized_telemetry=False, allow_reset=False)
    if chroma_url:
        u = urlparse(chroma_url)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise IndexError_(f"--chroma-url: expected http://HOST:PORT, got '{chroma_url}'")
        return chromadb.HttpClient(host=u.hostname, port=u.port or 8000, ssl=u.scheme == "https", settings=settings)
    path.mkdir(parents=True, exist_ok=True)
    return chromadb.PersistentClient(path=str(path / "chroma"), settings=settings)


def _collection(client):
    from patterns.retriever.embedding import ChromaEmbeddingFunction

    return client.get_or_create_collection(
        COLLECTION, embedding_function=ChromaEmbeddingFunction(), metadata={"hnsw:space": "cosine"}
    )


def build_index(entries: list[Entry], chroma_url: str | None = None, path: Path | None = None, progress=None) -> IndexStats:
    """Bring the collection in line with the library; write the snapshot (embedded mode)."""
    path = path or default_index_dir()
    try:
        client = _client(chroma_url, path)
        col = _collection(client)
        stored = col.get(include=["metadatas"])
    except IndexError_:
        raise
    except Exception as exc:  # a corrupt persistent store: start over rather than fail forever
        if chroma_url:
            raise IndexError_(f"{chroma_url}: cannot use ChromaDB server: {str(exc).splitlines()[0]}") from None
        from chromadb.api.client import SharedSystemClient

        SharedSystemClient.clear_system_cache()  # chroma caches the broken store per path
        shutil.rmtree(path / "chroma", ignore_errors=True)
        client = _client(None, path)
        col = _collection(client)
        stored = col.get(include=["metadatas"])
    have = {i: (m or {}).get("hash") for i, m in zip(stored["ids"], stored["metadatas"])}
    want = {e.id: content_hash(e) for e in entries}
    changed = [e for e in entries if have.get(e.id) != want[e.id]]
    removed = [i for i in have if i not in want]
    if removed:
        col.delete(ids=removed)
    if changed:
        from patterns.retriever.embedding import embed_documents

        documents = [e.pattern.search_text() for e in changed]
        task = progress.add_task("embedding patterns", total=len(changed)) if progress else None
        # one call for all documents keeps every core busy to the end
        vectors = embed_documents(documents, done=(lambda n: progress.advance(task, n)) if progress else None)
        col.upsert(
            ids=[e.id for e in changed],
            documents=documents,
            embeddings=vectors,
            metadatas=[
                {"hash": want[e.id], "category": e.pattern.category.value, "safety": e.pattern.safety.value, "title": e.pattern.title}
                for e in changed
            ],
        )
    if not chroma_url and (changed or removed or load_snapshot(entries, path) is None):
        _write_snapshot(col, path, entries)
    added = sum(1 for e in changed if e.id not in have)
    return IndexStats(added, len(changed) - added, len(removed), len(entries) - len(changed), chroma_url or str(path))


SNAPSHOT = "snapshot.json"


def _pack(vector) -> str:
    return base64.b64encode(array("f", map(float, vector)).tobytes()).decode()


def _unpack(text: str) -> array:
    return array("f", base64.b64decode(text))


def _derivation_code() -> str:
    """The code the snapshot's generality comes from: kernel facts of the examples, evaluated by the predicates."""
    from patterns.core.facts import extractor_digest
    from patterns.core.library import validation_code

    return hashlib.sha256(f"{validation_code()}\0{extractor_digest()}".encode()).hexdigest()[:32]


def _write_snapshot(col, path: Path, entries: list[Entry]) -> None:
    from patterns.retriever.embedding import MODEL_NAME
    from patterns.retriever.retrieve import generality

    data = col.get(include=["embeddings", "metadatas"])
    general = generality(entries)
    rows = [
        {"id": i, "hash": (m or {}).get("hash", ""), "generality": general.get(i, 1.0), "embedding": _pack(vec)}
        for i, m, vec in zip(data["ids"], data["metadatas"], data["embeddings"])
    ]
    snapshot = {"model": MODEL_NAME, "code": _derivation_code(), "float32": "native byte order", "patterns": rows}
    write_atomic(path / SNAPSHOT, json.dumps(snapshot).encode())


def load_snapshot(entries: list[Entry], path: Path | None = None) -> tuple[dict[str, array], dict[str, float]] | None:
    """(id -> embedding, id -> generality), or None when the snapshot is missing, corrupt or stale (library or code)."""
    path = path or default_index_dir()
    try:
        snapshot = json.loads((path / SNAPSHOT).read_bytes())
        if snapshot["code"] != _derivation_code():
            return None  # generality from another predicate library or extractor
        rows = snapshot["patterns"]
        vectors = {r["id"]: _unpack(r["embedding"]) for r in rows}
        stored = {r["id"]: r["hash"] for r in rows}
        general = {r["id"]: float(r["generality"]) for r in rows}
    except (OSError, ValueError, KeyError, TypeError):
        return None  # missing, corrupt or from an older version: the caller rebuilds
    if stored != {e.id: content_hash(e) for e in entries} or len({len(v) for v in vectors.values()}) > 1:
        return None
    return vectors, general


def ranking_data(queries: list[str], entries: list[Entry], chroma_url: str | None = None, path: Path | None = None,
                 progress=None) -> tuple[list[dict[str, float]], dict[str, float]]:
    """Similarities of each query to each pattern, and each pattern's generality (one snapshot read)."""
    path = path or default_index_dir()
    if chroma_url:
        from patterns.retriever.retrieve import generality

        build_index(entries, chroma_url=chroma_url, progress=progress)
        if not queries:
            return [], generality(entries)
        col = _collection(_client(chroma_url, path))
        vecs = _encode_queries(queries, path)
        res = col.query(query_embeddings=[list(v) for v in vecs], n_results=max(1, len(entries)), include=["distances"])
        sims = [{i: 1.0 - float(d) for i, d in zip(ids, dists)} for ids, dists in zip(res["ids"], res["distances"])]
        return sims, generality(entries)
    snap = load_snapshot(entries, path)
    if snap is None:
        build_index(entries, path=path, progress=progress)
        snap = load_snapshot(entries, path)
        if snap is None:
            raise IndexError_(f"{path}: index could not be rebuilt")
    vectors, general = snap
    dim = len(next(iter(vectors.values()), ()))
    # unit vectors: cosine similarity is the dot product
    return [{i: sum(map(mul, q, v)) for i, v in vectors.items()} for q in _encode_queries(queries, path, dim)], general


def similarities_many(queries: list[str], entries: list[Entry], **kw) -> list[dict[str, float]]:
    return ranking_data(queries, entries, **kw)[0]


def _encode_queries(queries: list[str], path: Path, dim: int | None = None) -> list[array]:
    """Embed queries, reusing earlier embeddings of the same text (an unchanged kernel re-queried)."""
    cache = path / "queries"
    keys = [hashlib.sha256(q.encode()).hexdigest()[:24] for q in queries]
    out: list[array | None] = []
    for k in keys:
        try:
            vec = array("f", (cache / f"{k}.f32").read_bytes())
            out.append(vec if dim is None or len(vec) == dim else None)
        except (OSError, ValueError):
            out.append(None)
    missing = [i for i, v in enumerate(out) if v is None]
    if missing:
        from patterns.retriever.embedding import embed_queries

        for i, vec in zip(missing, embed_queries([queries[i] for i in missing])):
            out[i] = array("f", map(float, vec))
            write_atomic(cache / f"{keys[i]}.f32", out[i].tobytes())
    return out


def similarities(query: str, entries: list[Entry], **kw) -> dict[str, float]:
    return similarities_many([query], entries, **kw)[0]
