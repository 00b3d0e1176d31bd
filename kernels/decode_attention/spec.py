"""What the validation gate needs to know about decode_attention.

Shape keys: B sequences, S the longest context, HQ query heads, HK key/value
heads, D head dim, PAGE the page size (0: contiguous `[B, S, HK, D]` cache),
L_MIN the shortest context (default S: every sequence is S long; lengths are
drawn uniformly in [L_MIN, S] otherwise, the first sequence always S).
"""
from __future__ import annotations

import math

import torch

from patterns.kernels.common import accepts, generator, itemsize, torch_dtype
from patterns.core.opspec import OpSpec, Partition, Tolerance


def make_inputs(shape: dict, dtype: str, seed: int = 0, device: str = "cpu") -> dict:
    B, S, HQ, HK, D = (shape[n] for n in ("B", "S", "HQ", "HK", "D"))
    PAGE, L_MIN = shape.get("PAGE", 0), shape.get("L_MIN", S)
    gen = generator(seed, device)
    act = dict(dtype=torch_dtype(dtype), device=device, generator=gen)
    seq_lens = torch.randint(L_MIN, S + 1, (B,), dtype=torch.int32, device=device, generator=gen)
    seq_lens[0] = S
    inputs = dict(q=torch.randn(B, HQ, D, **act))
    if not PAGE:
        inputs["k_cache"] = torch.randn(B, S, HK, D, **act)
        inputs["v_cache"] = torch.randn(B, S, HK, D, **act)
        inputs["seq_lens"] = seq_lens
        return inputs
    # page 0 is the padding page (unused table entries point at it); the others are shuffled
    n_pages = [math.ceil(int(n) / PAGE) for n in seq_lens]
    P = 1 + sum(n_pages)
    order = 1 + torch.randperm(P - 1, device=device, generator=gen).to(torch.int32)
    page_table = torch.zeros(B, math.ceil(S / PAGE), dtype=torch.int32, device=device)
    start = 0
    for i_b, n in enumerate(n_pages):
        page_table[i_b, :n] = order[start:start + n]
        start += n
    inputs["k_cache"] = torch.randn(P, PAGE, HK, D, **act)
    inputs["v_cache"] = torch.randn(P, PAGE, HK, D, **act)
    inputs["seq_lens"] = seq_lens
    inputs["page_table"] = page_table
    return inputs


def merge_partials(parts: list[tuple[torch.Tensor, torch.Tensor]], dtype: torch.dtype):
    """Combine attention over disjoint key ranges by their log-sum-exp, in fp32."""
    lse = torch.stack([p[1] for p in parts])
    o = torch.stack([p[0].float() for p in parts])
    lse_max = lse.max(0).values
    lse_max = torch.where(torch.isinf(lse_max), torch.zeros_like(lse_max), lse_max)
    w = (lse - lse_max).exp()
    denom = w.sum(0)
    o = (w[..., None] * o).sum(0) / denom.clamp_min(1e-30)[..., None]
    return o.to(dtype), lse_max + denom.log()


def run_partitioned(impl, inputs: dict, n: int):
    """Attention split into `n` KV ranges.

    A launcher that takes `num_kv_splits` (a split-KV candidate) splits itself;
    otherwise each range is run separately and the partials are merged here by
    their log-sum-exp.
    """
    if accepts(impl, "num_kv_splits"):
        return impl(**inputs, num_kv_splits=n)
    k_cache, v_cache, seq_lens = inputs["k_cache"], inputs["v_cache"], inputs["seq_lens"]
    page_table = inputs.get("page_table")
    parts = []
    if page_table is None:
        seg = math.ceil(k_cache.shape[1] / n)
        for i in range(n):
            lens = (seq_lens - i * seg).clamp(0, seg).to(torch.int32)
            sl = slice(i * seg, (i + 1) * seg)
            kv = {"k_cache": k_cache[:, sl].contiguous(), "v_cache": v_cache[:, sl].contiguous()}
            parts.append(impl(**{**inputs, **kv, "seq_lens": lens}))
    else:
        pps = math.ceil(page_table.shape[1] / n)
        seg = pps * k_cache.shape[1]
        for i in range(n):
            lens = (seq_lens - i * seg).clamp(0, seg).to(torch.int32)
            table = page_table[:, i * pps:(i + 1) * pps].contiguous()
            parts.append(impl(**{**inputs, "page_table": table, "seq_lens": lens}))
    return merge_partials(parts, inputs["q"].dtype)


def bytes_moved(shape: dict, dtype: str) -> float:
    B, S, HQ, HK, D = (shape[n] for n in ("B", "S", "HQ", "HK", "D"))
    L = (shape.get("L_MIN", S) + S) / 2
    s = itemsize(dtype)
    kv = 2 * B * L * HK * D * s  # every key and value once
    table = B * math.ceil(L / shape["PAGE"]) * 4 if shape.get("PAGE") else 0
    return kv + table + 2 * B * HQ * D * s + B * HQ * 4 + B * 4  # q, o, lse, seq_lens


def flops(shape: dict, dtype: str) -> float:
    B, S, HQ, HK, D = (shape[n] for n in ("B", "S", "HQ", "HK", "D"))
    L = (shape.get("L_MIN", S) + S) / 2
    return 4 * B * HQ * L * D  # q.k and p.v


def _s(B, S, HQ, HK, D, PAGE=0, L_MIN=None):
    return dict(B=B, S=S, HQ=HQ, HK=HK, D=D, PAGE=PAGE, L_MIN=S if L_MIN is None else L_MIN)


SPEC = OpSpec(
    name="decode_attention",
    baseline="baseline:decode_attention",
    reference="naive:naive_decode_attention",
    make_inputs=make_inputs,
    shapes=(
        _s(1, 63, 2, 2, 32),
        _s(3, 100, 4, 1, 80, L_MIN=1),
        _s(2, 77, 6, 2, 64, PAGE=16, L_MIN=20),
        _s(3, 45, 4, 4, 32, PAGE=1, L_MIN=1),
    ),
    dtypes=("float32", "bfloat16"),
    gpu_dtypes=("bfloat16",),
    tolerance={
        "float32": Tolerance(atol=1e-4, rtol=1e-4),
        "bfloat16": Tolerance(atol=1e-2, rtol=1e-2),
    },
    gpu_shapes=tuple(_s(B, 32768, 32, 8, 128, PAGE=page) for page in (0, 16) for B in (1, 8, 32, 64)),
    outputs=("o", "lse"),
    partition=Partition(
        axis="KV splits",
        counts=(1, 2, 4, 8, 16),
        run=run_partitioned,
        # partial outputs rounded to the output dtype before the merge
        tolerance={
            "float32": Tolerance(atol=1e-4, rtol=1e-4),
            "bfloat16": Tolerance(atol=2e-2, rtol=2e-2),
        },
        shape=_s(2, 160, 2, 1, 32, PAGE=16, L_MIN=60),
    ),
    bytes_moved=bytes_moved,
    flops=flops,
    bound="memory",
    # lengths and page ids are left out: perturbed, they address memory outside the cache
    sensitive_inputs=("q", "k_cache", "v_cache"),
    # D-long scores, then S weighted values; tl.dot on fp32 operands is TF32 on the GPU, and
    # the library's split-KV-grouped rewrite uses it (evidence/gpu/h200-decode_attention)
    accumulation="tf32",
    reduction=lambda s: s["S"] + s["D"],
    resource_limits={
        "max_num_warps": 8,
        "max_shared_memory_bytes": 232448,
        "max_num_kv_splits": 64,
    },
)
