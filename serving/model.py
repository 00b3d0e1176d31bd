"""A small hybrid decoder whose every kernel-sized step is one of the ops of kernels/.

Each layer is a token mixer followed by an RMSNorm-gated MLP, both behind a
pre-norm and a residual:

- `kda` layers: Kimi Delta Attention, a gated delta-rule linear attention with
  an fp32 state `[B, HV, K, V]` per layer (op `kda_decode`), its output
  normalised per head and gated (op `rmsnorm_gate`);
- `attn` layers: softmax attention of one query token over a paged KV cache
  (op `decode_attention`); no positional encoding, as in hybrid models whose
  linear-attention layers carry the order;
- the MLP: `rmsnorm_gate(up, gate) @ W_down`;
- every projection, and the logits, is op `matmul`.

The glue between ops (embedding lookup, the pre-norms, residual adds, writing
the new token's keys and values into its page) is plain PyTorch. Weights are
seeded and random: the model's output means nothing, its cost and data flow
are those of a real hybrid decoder of the same shape.

Two passes:

- `prefill` runs a whole prompt `[B, L]` at once: the projections and MLPs as
  one matmul over the B*L rows, the KDA layers as one `kda_decode` call over
  the L tokens (the recurrent form: the op loops over T inside the kernel),
  attention as PyTorch's causal `scaled_dot_product_attention` (kernels/ has
  no prefill attention op) after writing every key and value into its page;
- `step` decodes one token per sequence. It is written to be captured in a
  CUDA graph: it reads and writes only tensors of the cache (the slot of the
  new token comes from `seq_lens` and the page table on the device, and
  `seq_lens` is advanced in place), so it never syncs with the host nor
  depends on a host value that changes from step to step. Pages are handed
  out on the host beforehand (`KVCache.reserve`).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Callable, Mapping

import torch

OPS = ("kda_decode", "decode_attention", "rmsnorm_gate", "matmul")
Ops = Mapping[str, Callable[..., Any]]


@dataclass(frozen=True)
class ModelConfig:
    vocab: int = 128
    hidden: int = 64
    layers: tuple[str, ...] = ("kda", "attn", "kda", "attn")  # each layer's token mixer
    kda_heads: int = 2  # H, query/key heads
    kda_value_heads: int = 2  # HV
    kda_key_dim: int = 32  # K
    kda_value_dim: int = 32  # V
    attn_heads: int = 4  # HQ
    attn_kv_heads: int = 2  # HK
    attn_head_dim: int = 16  # D
    mlp_hidden: int = 128
    page: int = 16
    max_len: int = 256  # tokens per sequence the KV pool is sized for
    dtype: str = "float32"
    seed: int = 0

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["layers"] = list(self.layers)
        return d


PRESETS = {
    # runs through Triton's interpreter on a CPU in seconds
    "tiny": ModelConfig(),
    # the project's GPU shapes: KDA heads of 128 x 128 (kernels/kda_decode), GQA attention
    "small": ModelConfig(
        vocab=32000, hidden=2048, layers=("kda", "kda", "kda", "attn") * 2, kda_heads=16, kda_value_heads=16,
        kda_key_dim=128, kda_value_dim=128, attn_heads=16, attn_kv_heads=4, attn_head_dim=128, mlp_hidden=5632,
        page=16, max_len=4096, dtype="bfloat16",
    ),
    # a served hybrid model's decode on one H200: 16 layers, KDA and attention 3:1
    # (Kimi Linear's ratio), 32 heads of 128 in both mixers, GQA 32/8 with pages of 16:
    # the ops' GPU benchmark shapes (kernels/<op>/spec.py), about 3.8e9 bf16 parameters
    "h200": ModelConfig(
        vocab=32000, hidden=4096, layers=("kda", "kda", "kda", "attn") * 4, kda_heads=32, kda_value_heads=32,
        kda_key_dim=128, kda_value_dim=128, attn_heads=32, attn_kv_heads=8, attn_head_dim=128, mlp_hidden=11008,
        page=16, max_len=32768 + 1024, dtype="bfloat16",
    ),
}


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    x32 = x.float()
    return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(x.dtype)


class KVCache:
    """Decode-time state of a batch: KDA states, a paged KV pool per attention layer, the page table.

    Every tensor is allocated once, so a CUDA graph captured over it stays valid
    for the cache's life. Page 0 is the padding page that unused page-table
    entries point at; `reserve` hands each sequence pages from a shuffled free
    list, so a sequence's pages are scattered through the pool. The batch
    advances in lockstep: `length` is the host's count of the tokens each
    sequence holds, `seq_lens` the device's (the decode step advances it).
    """

    def __init__(self, cfg: ModelConfig, batch: int, device: str, max_len: int | None = None):
        dtype = getattr(torch, cfg.dtype)
        self.max_len = max_len or cfg.max_len
        max_pages = -(-self.max_len // cfg.page)
        n_pages = 1 + batch * max_pages
        self.cfg, self.batch = cfg, batch
        self.kda = {
            i: torch.zeros(batch, cfg.kda_value_heads, cfg.kda_key_dim, cfg.kda_value_dim, dtype=torch.float32, device=device)
            for i, kind in enumerate(cfg.layers) if kind == "kda"
        }
        page_shape = (n_pages, cfg.page, cfg.attn_kv_heads, cfg.attn_head_dim)
        self.k = {i: torch.zeros(page_shape, dtype=dtype, device=device) for i, kind in enumerate(cfg.layers) if kind == "attn"}
        self.v = {i: torch.zeros(page_shape, dtype=dtype, device=device) for i in self.k}
        self.page_table = torch.zeros(batch, max_pages, dtype=torch.int32, device=device)
        self.seq_lens = torch.zeros(batch, dtype=torch.int32, device=device)
        gen = torch.Generator().manual_seed(cfg.seed + 1)
        self.free = (1 + torch.randperm(n_pages - 1, generator=gen)).tolist()
        self.pages = 0  # pages each sequence holds
        self.length = 0

    def reset(self) -> None:
        """Empty, in place, for the next batch: pages back to the free list, zero states and lengths."""
        if self.pages:
            self.free += self.page_table[:, :self.pages].flatten().tolist()[::-1]
            self.page_table.zero_()
        for s in self.kda.values():
            s.zero_()
        self.seq_lens.zero_()
        self.pages = self.length = 0

    def reserve(self, tokens: int) -> None:
        """Pages for `tokens` more tokens per sequence, handed out now (one host-to-device copy)."""
        if self.length + tokens > self.max_len:
            raise ValueError(f"{self.length} + {tokens} tokens exceed the cache's max_len={self.max_len}")
        need = -(-(self.length + tokens) // self.cfg.page)
        if need > self.pages:
            fresh = [self.free.pop() for _ in range(self.batch * (need - self.pages))]
            rows = torch.tensor(fresh, dtype=torch.int32).view(self.batch, need - self.pages)
            self.page_table[:, self.pages:need] = rows.to(self.page_table.device)
            self.pages = need

    def advance(self, tokens: int) -> None:
        """The host's count follows the `tokens` the device has appended (reserved beforehand)."""
        assert self.length + tokens <= self.pages * self.cfg.page, "tokens appended beyond the reserved pages"
        self.length += tokens

    def snapshot(self) -> dict[str, Any]:
        """What a decode step changes besides the pages past `length` (the KDA states, the lengths)."""
        return {"length": self.length, "seq_lens": self.seq_lens.clone(), "kda": {i: s.clone() for i, s in self.kda.items()}}

    def restore(self, snap: dict[str, Any]) -> None:
        """Back to a snapshot, in place (the tensors a captured graph holds stay the same)."""
        self.length = snap["length"]
        self.seq_lens.copy_(snap["seq_lens"])
        for i, s in snap["kda"].items():
            self.kda[i].copy_(s)

    def fill_from(self, src: "KVCache", row: int = 0) -> None:
        """Every sequence a copy of `src`'s sequence `row`, each in pages of its own (no sharing)."""
        assert self.length == 0 and src.length <= self.max_len
        self.reserve(src.length)
        n = src.pages
        for i in self.kda:
            self.kda[i].copy_(src.kda[i][row].expand_as(self.kda[i]))
        for pool, src_pool in ((self.k, src.k), (self.v, src.v)):
            for i in pool:
                pool[i][self.page_table[:, :n].long()] = src_pool[i][src.page_table[row, :n].long()]
        self.seq_lens.fill_(src.length)
        self.length = src.length


class HybridModel:
    def __init__(self, cfg: ModelConfig, device: str):
        self.cfg, self.device = cfg, device
        self.dtype = getattr(torch, cfg.dtype)
        self.w = self._weights()

    def _weights(self) -> dict[str, torch.Tensor]:
        c = self.cfg
        # drawn where they live: billions of random numbers on a GPU take a moment, on the CPU minutes
        gen = torch.Generator(self.device).manual_seed(c.seed)
        fp32 = dict(generator=gen, device=self.device, dtype=torch.float32)

        def dense(n_in: int, n_out: int) -> torch.Tensor:
            return torch.randn(n_in, n_out, generator=gen, device=self.device, dtype=self.dtype).mul_(n_in**-0.5)

        def near_one(n: int) -> torch.Tensor:
            return (1 + 0.1 * torch.randn(n, **fp32)).to(self.dtype)

        H, HV, K, V = c.kda_heads, c.kda_value_heads, c.kda_key_dim, c.kda_value_dim
        HQ, HK, D = c.attn_heads, c.attn_kv_heads, c.attn_head_dim
        w = {"embed": torch.randn(c.vocab, c.hidden, **fp32).to(self.dtype), "norm_out": near_one(c.hidden)}
        for i, kind in enumerate(c.layers):
            w[f"{i}.norm_mix"], w[f"{i}.norm_mlp"] = near_one(c.hidden), near_one(c.hidden)
            if kind == "kda":
                # q, k, v, gate g, beta, output gate: one projection
                w[f"{i}.in"] = dense(c.hidden, 2 * H * K + HV * V + HV * K + HV + HV * V)
                # parameters of the KDA gate stay fp32 whatever the activations, as the op expects
                w[f"{i}.A_log"] = (1.5 * torch.rand(HV, **fp32)).log()
                w[f"{i}.dt_bias"] = 0.5 * torch.randn(HV * K, **fp32)
                w[f"{i}.o_norm"] = near_one(V)
                w[f"{i}.out"] = dense(HV * V, c.hidden)
            elif kind == "attn":
                w[f"{i}.qkv"] = dense(c.hidden, (HQ + 2 * HK) * D)
                w[f"{i}.out"] = dense(HQ * D, c.hidden)
            else:
                raise ValueError(f"layer {i}: unknown mixer '{kind}' (kda or attn)")
            w[f"{i}.up_gate"] = dense(c.hidden, 2 * c.mlp_hidden)
            w[f"{i}.mlp_norm"] = near_one(c.mlp_hidden)
            w[f"{i}.down"] = dense(c.mlp_hidden, c.hidden)
        # untied: with tied embeddings a random model's residual stream makes every token predict itself
        w["unembed"] = dense(c.hidden, c.vocab)
        return w

    def new_cache(self, batch: int, max_len: int | None = None) -> KVCache:
        return KVCache(self.cfg, batch, self.device, max_len)

    # ------------------------------------------------------------------ prefill
    def prefill(self, prompts: torch.Tensor, cache: KVCache, ops: Ops) -> torch.Tensor:
        """The prompts `[B, L]` into an empty cache, all L tokens at once; returns the last position's logits `[B, vocab]`."""
        B, L = prompts.shape
        assert cache.length == 0 and cache.batch == B, "prefill fills an empty cache of the prompts' batch"
        cache.reserve(L)
        pos = torch.arange(L, device=prompts.device)
        page = cache.page_table[:, pos // self.cfg.page].long()  # [B, L]
        offset = (pos % self.cfg.page).expand(B, L)
        x = self.w["embed"][prompts.reshape(-1)]  # [B*L, hidden]
        for i, kind in enumerate(self.cfg.layers):
            h = rms_norm(x, self.w[f"{i}.norm_mix"])
            if kind == "kda":
                x = x + self._kda(i, h.view(B, L, -1), cache, ops).view(B * L, -1)
            else:
                x = x + self._attention_prefill(i, h, cache, page, offset, ops)
            x = x + self._mlp(i, rms_norm(x, self.w[f"{i}.norm_mlp"]), ops)
        cache.seq_lens.fill_(L)
        cache.advance(L)
        last = x.view(B, L, -1)[:, -1]
        return ops["matmul"](a=rms_norm(last, self.w["norm_out"]).contiguous(), b=self.w["unembed"])

    def _attention_prefill(self, i: int, h: torch.Tensor, cache: KVCache, page: torch.Tensor, offset: torch.Tensor, ops: Ops) -> torch.Tensor:
        c, w = self.cfg, self.w
        B, L = page.shape
        HQ, HK, D = c.attn_heads, c.attn_kv_heads, c.attn_head_dim
        q, k, v = ops["matmul"](a=h, b=w[f"{i}.qkv"]).split([HQ * D, HK * D, HK * D], dim=-1)
        # the pool's dtype, so that the decode steps read exactly what the prefill attended to
        k = k.reshape(B, L, HK, D).to(cache.k[i].dtype)
        v = v.reshape(B, L, HK, D).to(cache.v[i].dtype)
        cache.k[i][page, offset] = k
        cache.v[i][page, offset] = v
        # each query head's key/value head, repeated: SDPA's fused kernels then take it (its GQA flag can fall back to
        # the unfused path, which holds L x L scores: 64 GB at 32k tokens)
        k, v = (t.transpose(1, 2).to(q.dtype).repeat_interleave(HQ // HK, dim=1) for t in (k, v))
        o = torch.nn.functional.scaled_dot_product_attention(q.reshape(B, L, HQ, D).transpose(1, 2), k, v, is_causal=True)
        return ops["matmul"](a=o.transpose(1, 2).reshape(B * L, HQ * D), b=w[f"{i}.out"])

    # ------------------------------------------------------------------ decode
    def step(self, tokens: torch.Tensor, cache: KVCache, ops: Ops) -> torch.Tensor:
        """One token per sequence (`[B]` ids) through every layer; returns the logits `[B, vocab]`.

        Graph-safe (see the module doc): the new token's slot is read on the device,
        and `seq_lens` advances in place; the caller advances `cache.length`.
        """
        pos = cache.seq_lens.long()
        page = cache.page_table.gather(1, (pos // self.cfg.page)[:, None]).squeeze(1).long()
        offset = pos % self.cfg.page
        cache.seq_lens.add_(1)
        x = self.w["embed"][tokens]
        for i, kind in enumerate(self.cfg.layers):
            h = rms_norm(x, self.w[f"{i}.norm_mix"])
            x = x + (self._kda(i, h[:, None], cache, ops)[:, 0] if kind == "kda" else self._attention(i, h, cache, page, offset, ops))
            x = x + self._mlp(i, rms_norm(x, self.w[f"{i}.norm_mlp"]), ops)
        return ops["matmul"](a=rms_norm(x, self.w["norm_out"]), b=self.w["unembed"])

    def _kda(self, i: int, h: torch.Tensor, cache: KVCache, ops: Ops) -> torch.Tensor:
        """`h` `[B, T, hidden]` through a KDA layer (T tokens in order, the state updated in place): `[B, T, hidden]`."""
        c, w = self.cfg, self.w
        B, T = h.shape[:2]
        H, HV, K, V = c.kda_heads, c.kda_value_heads, c.kda_key_dim, c.kda_value_dim
        proj = ops["matmul"](a=h.reshape(B * T, -1), b=w[f"{i}.in"])
        q, k, v, g, beta, gate = proj.split([H * K, H * K, HV * V, HV * K, HV, HV * V], dim=-1)
        o = ops["kda_decode"](
            q=q.reshape(B, T, H, K).contiguous(), k=k.reshape(B, T, H, K).contiguous(), v=v.reshape(B, T, HV, V).contiguous(),
            g=g.reshape(B, T, HV, K).contiguous(), beta=beta.reshape(B, T, HV).contiguous(),
            A_log=w[f"{i}.A_log"], dt_bias=w[f"{i}.dt_bias"], state=cache.kda[i],
        )
        o = ops["rmsnorm_gate"](x=o.reshape(B * T * HV, V), g=gate.reshape(B * T * HV, V).contiguous(), weight=w[f"{i}.o_norm"])
        return ops["matmul"](a=o.reshape(B * T, HV * V), b=w[f"{i}.out"]).view(B, T, -1)

    def _attention(self, i: int, h: torch.Tensor, cache: KVCache, page: torch.Tensor, offset: torch.Tensor, ops: Ops) -> torch.Tensor:
        c, w, B = self.cfg, self.w, h.shape[0]
        HQ, HK, D = c.attn_heads, c.attn_kv_heads, c.attn_head_dim
        q, k, v = ops["matmul"](a=h, b=w[f"{i}.qkv"]).split([HQ * D, HK * D, HK * D], dim=-1)
        # the pool keeps its own dtype (bf16 on a GPU) whatever precision the projection returned
        cache.k[i][page, offset] = k.reshape(B, HK, D).to(cache.k[i].dtype)
        cache.v[i][page, offset] = v.reshape(B, HK, D).to(cache.v[i].dtype)
        o, _ = ops["decode_attention"](
            q=q.reshape(B, HQ, D).contiguous(), k_cache=cache.k[i], v_cache=cache.v[i], seq_lens=cache.seq_lens, page_table=cache.page_table,
        )
        return ops["matmul"](a=o.reshape(B, HQ * D), b=w[f"{i}.out"])

    def _mlp(self, i: int, h: torch.Tensor, ops: Ops) -> torch.Tensor:
        up, gate = ops["matmul"](a=h, b=self.w[f"{i}.up_gate"]).split(self.cfg.mlp_hidden, dim=-1)
        y = ops["rmsnorm_gate"](x=up.contiguous(), g=gate.contiguous(), weight=self.w[f"{i}.mlp_norm"])
        return ops["matmul"](a=y, b=self.w[f"{i}.down"])
