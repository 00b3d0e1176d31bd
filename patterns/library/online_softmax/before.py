"""Single-query (decode) attention: o = softmax(q·Kᵀ·scale)·V per (batch, head).

Three passes over the keys: the row max, then the softmax denominator, then the
weighted sum of V. K is read three times from memory, V once.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def decode_attn_fwd_kernel(q, k, v, o, scale, T, D, BT: tl.constexpr, BD: tl.constexpr):
    i_bh = tl.program_id(0).to(tl.int64)
    o_d = tl.arange(0, BD)
    m_d = o_d < D
    # [BD]
    b_q = tl.load(q + i_bh * D + o_d, mask=m_d, other=0.0).to(tl.float32)
    p_k = k + i_bh * T * D
    p_v = v + i_bh * T * D

    b_m = tl.full([], float('-inf'), dtype=tl.float32)
    for i_t in range(0, T, BT):
        o_t = i_t + tl.arange(0, BT)
        m_t = o_t < T
        # [BT, BD]
        b_k = tl.load(p_k + o_t[:, None] * D + o_d[None, :], mask=m_t[:, None] & m_d[None, :], other=0.0)
        b_s = tl.where(m_t, tl.sum(b_q[None, :] * b_k, 1) * scale, float('-inf'))
        b_m = tl.maximum(b_m, tl.max(b_s, 0))

    b_acc = tl.zeros([], dtype=tl.float32)
    for i_t in range(0, T, BT):
        o_t = i_t + tl.arange(0, BT)
        m_t = o_t < T
        b_k = tl.load(p_k + o_t[:, None] * D + o_d[None, :], mask=m_t[:, None] & m_d[None, :], other=0.0)
        b_s = tl.where(m_t, tl.sum(b_q[None, :] * b_k, 1) * scale, float('-inf'))
        b_acc += tl.sum(tl.exp(b_s - b_m), 0)

    # [BD]
    b_o = tl.zeros([BD], dtype=tl.float32)
    for i_t in range(0, T, BT):
        o_t = i_t + tl.arange(0, BT)
        m_t = o_t < T
        b_k = tl.load(p_k + o_t[:, None] * D + o_d[None, :], mask=m_t[:, None] & m_d[None, :], other=0.0)
        b_v = tl.load(p_v + o_t[:, None] * D + o_d[None, :], mask=m_t[:, None] & m_d[None, :], other=0.0)
        b_s = tl.where(m_t, tl.sum(b_q[None, :] * b_k, 1) * scale, float('-inf'))
        b_p = tl.exp(b_s - b_m) / b_acc
        b_o += tl.sum(b_p[:, None] * b_v, 0)
    tl.store(o + i_bh * D + o_d, b_o, mask=m_d)


def decode_attn(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    BH, T, D = k.shape
    o = torch.empty_like(q)
    BD = triton.next_power_of_2(D)
    decode_attn_fwd_kernel[(BH,)](q, k, v, o, D ** -0.5, T, D, BT=32, BD=BD)
    return o
