"""K rotary embedding fused with the paged KV-cache write: the program reads its token's slot and stores into the page."""
import torch
import triton
import triton.language as tl


@triton.jit
def rope_store_kv_kernel(k, v, cos, sin, slot_mapping, k_cache, v_cache, HK, PAGE: tl.constexpr, D: tl.constexpr):
    tok, head = tl.program_id(0).to(tl.int64), tl.program_id(1)
    slot = tl.load(slot_mapping + tok).to(tl.int64)
    if slot < 0:
        return
    page, off = slot // PAGE, slot % PAGE
    half = tl.arange(0, D // 2)
    c = tl.load(cos + tok * (D // 2) + half)
    s = tl.load(sin + tok * (D // 2) + half)
    src = (tok * HK + head) * D
    x1, x2 = tl.load(k + src + half), tl.load(k + src + D // 2 + half)
    dst = ((page * PAGE + off) * HK + head) * D
    tl.store(k_cache + dst + half, x1 * c - x2 * s)
    tl.store(k_cache + dst + D // 2 + half, x2 * c + x1 * s)
    full = tl.arange(0, D)
    tl.store(v_cache + dst + full, tl.load(v + src + full))


def rope_store_kv(k, v, cos, sin, slot_mapping, k_cache, v_cache, PAGE: int = 16):
    T, HK, D = k.shape
    rope_store_kv_kernel[(T, HK)](k, v, cos, sin, slot_mapping, k_cache, v_cache, HK, PAGE=PAGE, D=D)
    return k_cache, v_cache
