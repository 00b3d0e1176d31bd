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
- every projection, and the logits against the tied embedding, is op `matmul`.

The glue between ops (embedding lookup, the pre-norms, residual adds, writing
the new token's keys and values into its page) is plain PyTorch. Weights are
seeded and random: the model's output means nothing, its cost and data flow
are those of a real hybrid decoder of the same shape.
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
}


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    x32 = x.float()
    return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(x.dtype)


class KVCache:
    """Decode-time state of a batch: KDA states, a paged KV pool per attention layer, the page table.

    Page 0 is the padding page that unused page-table entries point at; a
    sequence takes a page from the free list when it crosses a page boundary,
    in a shuffled order, so a sequence's pages are scattered through the pool.
    """

    def __init__(self, cfg: ModelConfig, batch: int, device: str):
        dtype = getattr(torch, cfg.dtype)
        max_pages = -(-cfg.max_len // cfg.page)
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
        self.length = 0  # tokens each sequence holds (the batch advances in lockstep)

    def append_slot(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Room for one more token per sequence: its (page, offset in page), each `[B]`."""
        if self.length >= self.cfg.max_len:
            raise ValueError(f"sequence longer than max_len={self.cfg.max_len}")
        i_p, offset = divmod(self.length, self.cfg.page)
        if offset == 0:
            pages = [self.free.pop() for _ in range(self.batch)]
            self.page_table[:, i_p] = torch.tensor(pages, dtype=torch.int32)
        self.length += 1
        self.seq_lens.fill_(self.length)
        page = self.page_table[:, i_p].long()
        return page, torch.full_like(page, offset)


class HybridModel:
    def __init__(self, cfg: ModelConfig, device: str):
        self.cfg, self.device = cfg, device
        self.dtype = getattr(torch, cfg.dtype)
        self.w = self._weights()

    def _weights(self) -> dict[str, torch.Tensor]:
        c = self.cfg
        gen = torch.Generator().manual_seed(c.seed)

        def dense(n_in: int, n_out: int) -> torch.Tensor:
            return torch.randn(n_in, n_out, generator=gen) / n_in**0.5

        def near_one(n: int) -> torch.Tensor:
            return 1 + 0.1 * torch.randn(n, generator=gen)

        H, HV, K, V = c.kda_heads, c.kda_value_heads, c.kda_key_dim, c.kda_value_dim
        HQ, HK, D = c.attn_heads, c.attn_kv_heads, c.attn_head_dim
        w = {"embed": torch.randn(c.vocab, c.hidden, generator=gen), "norm_out": near_one(c.hidden)}
        for i, kind in enumerate(c.layers):
            w[f"{i}.norm_mix"], w[f"{i}.norm_mlp"] = near_one(c.hidden), near_one(c.hidden)
            if kind == "kda":
                # q, k, v, gate g, beta, output gate: one projection
                w[f"{i}.in"] = dense(c.hidden, 2 * H * K + HV * V + HV * K + HV + HV * V)
                w[f"{i}.A_log"] = (1.5 * torch.rand(HV, generator=gen)).log()
                w[f"{i}.dt_bias"] = 0.5 * torch.randn(HV * K, generator=gen)
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
        w["unembed"] = w["embed"].t().contiguous()  # tied, [hidden, vocab] for the matmul op
        # parameters of the KDA gate stay fp32 whatever the activations, as the op expects
        fp32 = {k for k in w if k.endswith((".A_log", ".dt_bias"))}
        return {k: v.to(self.device, torch.float32 if k in fp32 else self.dtype) for k, v in w.items()}

    def new_cache(self, batch: int) -> KVCache:
        return KVCache(self.cfg, batch, self.device)

    def step(self, tokens: torch.Tensor, cache: KVCache, ops: Ops) -> torch.Tensor:
        """One token per sequence (`[B]` ids) through every layer; returns the logits `[B, vocab]`."""
        page, offset = cache.append_slot()
        x = self.w["embed"][tokens]
        for i, kind in enumerate(self.cfg.layers):
            h = rms_norm(x, self.w[f"{i}.norm_mix"])
            x = x + (self._kda(i, h, cache, ops) if kind == "kda" else self._attention(i, h, cache, page, offset, ops))
            x = x + self._mlp(i, rms_norm(x, self.w[f"{i}.norm_mlp"]), ops)
        return ops["matmul"](a=rms_norm(x, self.w["norm_out"]), b=self.w["unembed"])

    def _kda(self, i: int, h: torch.Tensor, cache: KVCache, ops: Ops) -> torch.Tensor:
        c, w, B = self.cfg, self.w, h.shape[0]
        H, HV, K, V = c.kda_heads, c.kda_value_heads, c.kda_key_dim, c.kda_value_dim
        q, k, v, g, beta, gate = ops["matmul"](a=h, b=w[f"{i}.in"]).split([H * K, H * K, HV * V, HV * K, HV, HV * V], dim=-1)
        o = ops["kda_decode"](
            q=q.reshape(B, 1, H, K).contiguous(), k=k.reshape(B, 1, H, K).contiguous(), v=v.reshape(B, 1, HV, V).contiguous(),
            g=g.reshape(B, 1, HV, K).contiguous(), beta=beta.reshape(B, 1, HV).contiguous(),
            A_log=w[f"{i}.A_log"], dt_bias=w[f"{i}.dt_bias"], state=cache.kda[i],
        )
        o = ops["rmsnorm_gate"](x=o.reshape(B * HV, V), g=gate.reshape(B * HV, V).contiguous(), weight=w[f"{i}.o_norm"])
        return ops["matmul"](a=o.reshape(B, HV * V), b=w[f"{i}.out"])

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
