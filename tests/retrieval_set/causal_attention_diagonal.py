"""Causal attention written FLA-style: an unmasked loop over the key tiles below the query tile, then the diagonal tile with the mask."""
import torch
import triton
import triton.language as tl


@triton.jit
def causal_attn_two_loop_kernel(q, k, v, o, scale, T, D: tl.constexpr, BT: tl.constexpr, BS: tl.constexpr):
    i_t, i_bh = tl.program_id(0), tl.program_id(1).to(tl.int64)
    o_q = i_t * BT + tl.arange(0, BT)
    o_d = tl.arange(0, D)
    p_base = i_bh * T * D
    b_q = tl.load(q + p_base + o_q[:, None] * D + o_d[None, :], mask=o_q[:, None] < T, other=0.0)
    b_m = tl.full([BT], float("-inf"), dtype=tl.float32)
    b_acc = tl.zeros([BT], dtype=tl.float32)
    b_o = tl.zeros([BT, D], dtype=tl.float32)
    for i_s in range(0, i_t * BT, BS):
        o_k = i_s + tl.arange(0, BS)
        b_k = tl.load(k + p_base + o_k[:, None] * D + o_d[None, :])
        b_v = tl.load(v + p_base + o_k[:, None] * D + o_d[None, :])
        b_s = tl.dot(b_q, tl.trans(b_k)) * scale
        b_m, b_mp = tl.maximum(b_m, tl.max(b_s, 1)), b_m
        b_r = tl.exp(b_mp - b_m)
        b_p = tl.exp(b_s - b_m[:, None])
        b_acc = b_acc * b_r + tl.sum(b_p, 1)
        b_o = b_o * b_r[:, None] + tl.dot(b_p, b_v)
    for i_s in range(i_t * BT, tl.minimum((i_t + 1) * BT, T), BS):
        o_k = i_s + tl.arange(0, BS)
        b_k = tl.load(k + p_base + o_k[:, None] * D + o_d[None, :], mask=o_k[:, None] < T, other=0.0)
        b_v = tl.load(v + p_base + o_k[:, None] * D + o_d[None, :], mask=o_k[:, None] < T, other=0.0)
        b_s = tl.dot(b_q, tl.trans(b_k)) * scale
        b_s = tl.where((o_q[:, None] >= o_k[None, :]) & (o_k[None, :] < T), b_s, float("-inf"))
        b_m, b_mp = tl.maximum(b_m, tl.max(b_s, 1)), b_m
        b_r = tl.exp(b_mp - b_m)
        b_p = tl.exp(b_s - b_m[:, None])
        b_acc = b_acc * b_r + tl.sum(b_p, 1)
        b_o = b_o * b_r[:, None] + tl.dot(b_p, b_v)
    tl.store(o + p_base + o_q[:, None] * D + o_d[None, :], b_o / b_acc[:, None], mask=o_q[:, None] < T)


def causal_attention(q, k, v):
    BH, T, D = q.shape
    o = torch.empty_like(q)
    causal_attn_two_loop_kernel[(triton.cdiv(T, 32), BH)](q, k, v, o, D**-0.5, T, D=D, BT=32, BS=32)
    return o
