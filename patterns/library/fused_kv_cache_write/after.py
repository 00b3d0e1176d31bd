"""Rotary embedding of the new keys, then the KV-cache write, for one prefill or decode step.

k, v are [T, H, D] (the step's tokens); slot_mapping[t] is the cache slot of
token t. One kernel rotates k in registers and stores it, and v, straight into
the token's cache slot: the rotated keys are written once, where they live.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def rope_cache_fwd_kernel(k, v, cos, sin, slot_mapping, k_cache, v_cache, H, D: tl.constexpr):
    i_t, i_h = tl.program_id(0).to(tl.int64), tl.program_id(1)
    slot = tl.load(slot_mapping + i_t).to(tl.int64)
    if slot < 0:  # a padding token owns no slot
        return
    o_d = tl.arange(0, D // 2)
    p_k = k + (i_t * H + i_h) * D
    b_k1, b_k2 = tl.load(p_k + o_d), tl.load(p_k + D // 2 + o_d)
    b_c, b_s = tl.load(cos + i_t * (D // 2) + o_d), tl.load(sin + i_t * (D // 2) + o_d)
    p_kc = k_cache + (slot * H + i_h) * D
    tl.store(p_kc + o_d, b_k1 * b_c - b_k2 * b_s)
    tl.store(p_kc + D // 2 + o_d, b_k2 * b_c + b_k1 * b_s)
    o_v = tl.arange(0, D)
    tl.store(v_cache + (slot * H + i_h) * D + o_v, tl.load(v + (i_t * H + i_h) * D + o_v))


def rope_and_cache(k, v, cos, sin, slot_mapping, k_cache, v_cache):
    T, H, D = k.shape
    rope_cache_fwd_kernel[(T, H)](k, v, cos, sin, slot_mapping, k_cache, v_cache, H, D=D)
    return k_cache, v_cache
