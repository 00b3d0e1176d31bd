"""Rotary embedding of the new keys, then the KV-cache write, for one prefill or decode step.

k, v are [T, H, D] (the step's tokens); slot_mapping[t] is the cache slot of
token t. A kernel rotates k into a temporary [T, H, D] tensor, and the
launcher scatters it and v into the cache slots with two index_copy_ calls.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def rope_fwd_kernel(k, cos, sin, k_out, H, D: tl.constexpr):
    i_t, i_h = tl.program_id(0).to(tl.int64), tl.program_id(1)
    o_d = tl.arange(0, D // 2)
    p_k = k + (i_t * H + i_h) * D
    b_k1, b_k2 = tl.load(p_k + o_d), tl.load(p_k + D // 2 + o_d)
    b_c, b_s = tl.load(cos + i_t * (D // 2) + o_d), tl.load(sin + i_t * (D // 2) + o_d)
    p_o = k_out + (i_t * H + i_h) * D
    tl.store(p_o + o_d, b_k1 * b_c - b_k2 * b_s)
    tl.store(p_o + D // 2 + o_d, b_k2 * b_c + b_k1 * b_s)


def rope_and_cache(k, v, cos, sin, slot_mapping, k_cache, v_cache):
    T, H, D = k.shape
    k_rot = torch.empty_like(k)
    rope_fwd_kernel[(T, H)](k, cos, sin, k_rot, H, D=D)
    # the rotated keys make a round trip through memory before the scatter
    k_cache.index_copy_(0, slot_mapping.long(), k_rot)
    v_cache.index_copy_(0, slot_mapping.long(), v)
    return k_cache, v_cache
