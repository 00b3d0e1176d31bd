"""The library's embedding index in ChromaDB (embedded by default, or a server).

`patterns index` embeds each pattern's text with all-MiniLM-L6-v2 and upserts
it into a ChromaDB collection, incrementally: a pattern whose content hash is
unchanged is not re-embedded, a removed pattern is deleted.

Beside the embedded collection the build writes `snapshot.npz` (ids, content
hashes, embeddings exported from the collection). `patterns suggest` reads the
snapshot on its hot path because importing chromadb alone costs ~1.7 s here;
the snapshot is used only while every hash matches the library, otherwise the
index is rebuilt from ChromaDB. With `--chroma-url` the server is queried
directly.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

import numpy as np

from patterns.library import Entry
from patterns.retriever.embedding import DIM, embed_queries

COLLECTION = "patterns"


class IndexError_(RuntimeError):
    """The index cannot be used or built; one line."""


def default_index_dir() -> Path:
    if "PATTERNS_INDEX_DIR" in os.environ:
        return Path(os.environ["PATTERNS_INDEX_DIR"])
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("patterns")) / "index"


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
    import chromadb
    from chromadb.config import Settings

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
        task = progress.add_task("embedding patterns", total=len(changed)) if progress else None
        batch = 32
        for i in range(0, len(changed), batch):
            chunk = changed[i : i + batch]
            col.upsert(
                ids=[e.id for e in chunk],
                documents=[e.pattern.search_text() for e in chunk],
                metadatas=[
                    {"hash": want[e.id], "category": e.pattern.category.value, "safety": e.pattern.safety.value, "title": e.pattern.title}
                    for e in chunk
                ],
            )
            if progress:
                progress.advance(task, len(chunk))
    if not chroma_url:
        _write_snapshot(col, path, entries)
    added = sum(1 for e in changed if e.id not in have)
    return IndexStats(added, len(changed) - added, len(removed), len(entries) - len(changed), chroma_url or str(path))


def _write_snapshot(col, path: Path, entries: list[Entry]) -> None:
    from patterns.retriever.retrieve import generality

    data = col.get(include=["embeddings", "metadatas"])
    ids = list(data["ids"])
    hashes = [(m or {}).get("hash", "") for m in data["metadatas"]]
    emb = np.asarray(data["embeddings"], dtype=np.float32).reshape(len(ids), -1)
    general = generality(entries)
    fd, tmp = tempfile.mkstemp(dir=path, suffix=".npz")
    os.close(fd)
    np.savez(tmp, ids=np.array(ids), hashes=np.array(hashes), embeddings=emb,
             generality=np.array([general.get(i, 1.0) for i in ids], dtype=np.float32))
    os.replace(tmp, path / "snapshot.npz")


def load_snapshot(entries: list[Entry], path: Path | None = None) -> tuple[dict[str, np.ndarray], dict[str, float]] | None:
    """(id -> embedding, id -> generality), or None when the snapshot is missing, corrupt or stale."""
    path = path or default_index_dir()
    f = path / "snapshot.npz"
    if not f.exists():
        return None
    try:
        with np.load(f, allow_pickle=False) as z:
            ids, hashes, emb, gen = list(z["ids"]), list(z["hashes"]), z["embeddings"], z["generality"]
    except Exception:
        return None  # corrupt or from an older version: the caller rebuilds
    current = {e.id: content_hash(e) for e in entries}
    stored = dict(zip(ids, hashes))
    if stored != current or emb.shape[0] != len(ids):
        return None
    return {i: emb[k] for k, i in enumerate(ids)}, {i: float(gen[k]) for k, i in enumerate(ids)}


def ranking_data(queries: list[str], entries: list[Entry], chroma_url: str | None = None, path: Path | None = None,
                 progress=None) -> tuple[list[dict[str, float]], dict[str, float]]:
    """Similarities of each query to each pattern, and each pattern's generality (one snapshot read)."""
    path = path or default_index_dir()
    vecs = _encode_queries(queries, path) if queries else np.zeros((0, DIM), np.float32)
    if chroma_url:
        from patterns.retriever.retrieve import generality

        build_index(entries, chroma_url=chroma_url, progress=progress)
        if not queries:
            return [], generality(entries)
        col = _collection(_client(chroma_url, path))
        res = col.query(query_embeddings=[v.tolist() for v in vecs], n_results=max(1, len(entries)), include=["distances"])
        sims = [{i: 1.0 - float(d) for i, d in zip(ids, dists)} for ids, dists in zip(res["ids"], res["distances"])]
        return sims, generality(entries)
    snap = load_snapshot(entries, path)
    if snap is None:
        build_index(entries, path=path, progress=progress)
        snap = load_snapshot(entries, path)
        if snap is None:
            raise IndexError_(f"{path}: index could not be rebuilt")
    vectors, general = snap
    ids = list(vectors)
    mat = np.stack([vectors[i] for i in ids]) if ids else np.zeros((0, vecs.shape[1]), np.float32)
    return [dict(zip(ids, map(float, row))) for row in vecs @ mat.T], general


def similarities_many(queries: list[str], entries: list[Entry], **kw) -> list[dict[str, float]]:
    return ranking_data(queries, entries, **kw)[0]


def _encode_queries(queries: list[str], path: Path) -> np.ndarray:
    """Embed queries, reusing earlier embeddings of the same text (an unchanged kernel re-queried)."""
    cache = path / "queries"
    keys = [hashlib.sha256(q.encode()).hexdigest()[:24] for q in queries]
    out: list[np.ndarray | None] = []
    for k in keys:
        try:
            out.append(np.load(cache / f"{k}.npy", allow_pickle=False))
        except (OSError, ValueError):
            out.append(None)
    missing = [i for i, v in enumerate(out) if v is None or v.shape != (DIM,)]
    if missing:
        fresh = embed_queries([queries[i] for i in missing])
        cache.mkdir(parents=True, exist_ok=True)
        for i, vec in zip(missing, fresh):
            out[i] = vec
            fd, tmp = tempfile.mkstemp(dir=cache, suffix=".npy")
            os.close(fd)
            np.save(tmp, vec)
            os.replace(tmp, cache / f"{keys[i]}.npy")
    return np.stack(out)


def similarities(query: str, entries: list[Entry], **kw) -> dict[str, float]:
    return similarities_many([query], entries, **kw)[0]
