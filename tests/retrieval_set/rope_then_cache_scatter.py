"""Q/K rotary embedding (GPT-NeoX halves) in one kernel, then the new keys and values scattered into the KV cache with index_copy_."""
import torch
import triton
import triton.language as tl


@triton.jit
def qk_rope_kernel(q, k, q_out, k_out, cos, sin, HQ, HK, D: tl.constexpr):
    tok, head = tl.program_id(0).to(tl.int64), tl.program_id(1)
    half = tl.arange(0, D // 2)
    c = tl.load(cos + tok * (D // 2) + half)
    s = tl.load(sin + tok * (D // 2) + half)
    if head < HQ:
        base = (tok * HQ + head) * D
        x1, x2 = tl.load(q + base + half), tl.load(q + base + D // 2 + half)
        tl.store(q_out + base + half, x1 * c - x2 * s)
        tl.store(q_out + base + D // 2 + half, x2 * c + x1 * s)
    else:
        base = (tok * HK + head - HQ) * D
        x1, x2 = tl.load(k + base + half), tl.load(k + base + D // 2 + half)
        tl.store(k_out + base + half, x1 * c - x2 * s)
        tl.store(k_out + base + D // 2 + half, x2 * c + x1 * s)


def rope_and_store(q, k, v, cos, sin, slot_mapping, k_cache, v_cache):
    T, HQ, D = q.shape
    HK = k.shape[1]
    q_out, k_out = torch.empty_like(q), torch.empty_like(k)
    qk_rope_kernel[(T, HQ + HK)](q, k, q_out, k_out, cos, sin, HQ, HK, D=D)
    k_cache.index_copy_(0, slot_mapping.long(), k_out)
    v_cache.index_copy_(0, slot_mapping.long(), v)
    return q_out
