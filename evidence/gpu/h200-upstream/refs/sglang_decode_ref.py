"""Inputs and a plain PyTorch reference for SGLang 0.5.23's Triton decode attention,
decode_attention_fwd (sglang/kernels/ops/attention/decode_attention.py): one query token per
sequence against a token pool addressed through kv_indptr / kv_indices (page size 1), GQA when
HQ > HK, split over KV in stage 1 (partials in attn_logits / attn_lse) and merged in stage 2.
Written for this project.

Shape keys: B sequences, S the longest context (lengths drawn in [S/2, S], the first S), HQ query
heads, HK key/value heads, D head dim, SPLITS = max_kv_splits."""
import torch


def make_inputs(shape, dtype, seed=0, device="cpu"):
    B, S, HQ, HK, D, SPLITS = (shape[n] for n in ("B", "S", "HQ", "HK", "D", "SPLITS"))
    gen = torch.Generator(device=device).manual_seed(seed)
    act = dict(dtype=getattr(torch, dtype), device=device)
    lens = torch.randint(max(1, S // 2), S + 1, (B,), device=device, generator=gen, dtype=torch.int32)
    lens[0] = S
    indptr = torch.zeros(B + 1, dtype=torch.int32, device=device)
    indptr[1:] = torch.cumsum(lens, 0)
    # every tensor's shape depends on the shape alone, not the seed (the gate swaps inputs between calls):
    # a pool of B*S + 7 slots, kv_indices as long as the longest batch (the tail past kv_indptr[-1] unread)
    pool = B * S + 7
    indices = torch.randperm(pool, device=device, generator=gen)[:B * S].to(torch.int64)
    return dict(
        q=torch.randn(B, HQ, D, generator=gen, device=device).to(act["dtype"]),
        k_buffer=torch.randn(pool, HK, D, generator=gen, device=device).to(act["dtype"]),
        v_buffer=torch.randn(pool, HK, D, generator=gen, device=device).to(act["dtype"]),
        o=torch.zeros(B, HQ, D, **act),
        kv_indptr=indptr,
        kv_indices=indices,
        attn_logits=torch.zeros(B, HQ, SPLITS, D, dtype=torch.float32, device=device),
        attn_lse=torch.zeros(B, HQ, SPLITS, dtype=torch.float32, device=device),
        num_kv_splits=torch.full((B,), SPLITS, dtype=torch.int32, device=device),
        max_kv_splits=SPLITS,
        sm_scale=D ** -0.5,
        k_scale=1.0,
        v_scale=1.0,
    )


def decode_attention_fwd(q, k_buffer, v_buffer, o, kv_indptr, kv_indices, attn_logits, attn_lse, num_kv_splits,
                         max_kv_splits, sm_scale, k_scale, v_scale, logit_cap=0.0, sinks=None, **_):
    """Writes softmax(q k^T * scale) v into o, per sequence, in fp32; splits do not change the result."""
    assert logit_cap == 0.0 and sinks is None, "the reference models neither logit capping nor sinks"
    HQ, HK = q.shape[1], k_buffer.shape[1]
    for b in range(q.shape[0]):
        idx = kv_indices[int(kv_indptr[b]):int(kv_indptr[b + 1])]
        k = k_buffer[idx].float().repeat_interleave(HQ // HK, dim=1) * k_scale  # [L, HQ, D]
        v = v_buffer[idx].float().repeat_interleave(HQ // HK, dim=1) * v_scale
        p = torch.softmax(torch.einsum("hd,lhd->hl", q[b].float(), k) * sm_scale, dim=-1)
        o[b] = torch.einsum("hl,lhd->hd", p, v).to(o.dtype)


def bytes_moved(shape, dtype):
    B, S, HQ, HK, D = (shape[n] for n in ("B", "S", "HQ", "HK", "D"))
    s = torch.empty((), dtype=getattr(torch, dtype)).element_size()
    return B * (0.75 * S) * 2 * HK * D * s + 2 * B * HQ * D * s  # K and V read once (mean length 3S/4), q and o


def flops(shape, dtype):
    B, S, HQ, D = (shape[n] for n in ("B", "S", "HQ", "D"))
    return 4 * B * HQ * 0.75 * S * D
