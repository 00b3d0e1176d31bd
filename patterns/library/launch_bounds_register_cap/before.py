"""Decode attention over a contiguous KV cache: o[b, h] = softmax(q·Kᵀ·scale)·V, one program per (batch, head).

The KV loop streams [BT, D] tiles at 4 warps per program; how many programs
an SM holds at once depends on the registers each thread is given.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def decode_attn_fwd_kernel(q, k, v, o, scale, T, D: tl.constexpr, BT: tl.constexpr):
    i_bh = tl.program_id(0).to(tl.int64)
    o_d = tl.arange(0, D)
    b_q = tl.load(q + i_bh * D + o_d).to(tl.float32)
    b_m = tl.full([], float('-inf'), dtype=tl.float32)
    b_l = tl.zeros([], dtype=tl.float32)
    b_o = tl.zeros([D], dtype=tl.float32)
    for i_t in range(0, T, BT):
        o_t = i_t + tl.arange(0, BT)
        m_t = o_t < T
        b_k = tl.load(k + (i_bh * T + o_t[:, None]) * D + o_d[None, :], mask=m_t[:, None], other=0.0).to(tl.float32)
        b_v = tl.load(v + (i_bh * T + o_t[:, None]) * D + o_d[None, :], mask=m_t[:, None], other=0.0).to(tl.float32)
        b_s = tl.where(m_t, tl.sum(b_k * b_q[None, :], 1) * scale, float('-inf'))
        b_m, b_mp = tl.maximum(b_m, tl.max(b_s, 0)), b_m
        b_r = tl.exp(b_mp - b_m)
        b_p = tl.exp(b_s - b_m)
        b_l = b_l * b_r + tl.sum(b_p, 0)
        b_o = b_o * b_r + tl.sum(b_p[:, None] * b_v, 0)
    tl.store(o + i_bh * D + o_d, b_o / b_l)


def decode_attn(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    BH, T, D = k.shape
    o = torch.empty_like(q)
    decode_attn_fwd_kernel[(BH,)](q, k, v, o, D ** -0.5, T, D=D, BT=64, num_warps=4)
    return o
