"""Gated linear attention forward (scalar decay per token and head), chunkwise form.

chunk_fwd_kernel_h walks the NT = T/BT chunks of a sequence and checkpoints the
state entering each chunk to h[b, i_t, head]; chunk_fwd_kernel_o then computes
every chunk's output in parallel from its checkpoint (inter-chunk part) and a
causal BT x BT attention inside the chunk (intra-chunk part), both as tl.dot.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def chunk_fwd_kernel_h(
    k, v, g, h, ht, T,
    H: tl.constexpr, K: tl.constexpr, V: tl.constexpr, BT: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr,
):
    i_v, i_nh = tl.program_id(0).to(tl.int64), tl.program_id(1).to(tl.int64)
    i_n, i_h = i_nh // H, i_nh % H
    NT = tl.cdiv(T, BT)
    o_k = tl.arange(0, BK)
    o_v = i_v * BV + tl.arange(0, BV)
    m_k, m_v = o_k < K, o_v < V
    m_h = m_k[:, None] & m_v[None, :]
    # [BK, BV]
    b_h = tl.zeros([BK, BV], dtype=tl.float32)
    for i_t in range(NT):
        # checkpoint: the state entering chunk i_t
        p_h = h + ((i_n * NT + i_t) * H + i_h) * K * V + o_k[:, None] * V + o_v[None, :]
        tl.store(p_h, b_h, mask=m_h)
        o_t = i_t * BT + tl.arange(0, BT)
        m_t = o_t < T
        # [BK, BT], [BT, BV]
        b_k = tl.load(k + ((i_n * T + o_t[None, :]) * H + i_h) * K + o_k[:, None], mask=m_k[:, None] & m_t[None, :], other=0).to(tl.float32)
        b_v = tl.load(v + ((i_n * T + o_t[:, None]) * H + i_h) * V + o_v[None, :], mask=m_t[:, None] & m_v[None, :], other=0).to(tl.float32)
        # decay from each token to the end of the chunk
        b_g = tl.load(g + (i_n * T + o_t) * H + i_h, mask=m_t, other=0)
        b_g_last = tl.sum(b_g, 0)
        b_gc = tl.cumsum(b_g, 0)
        b_h = b_h * tl.exp(b_g_last) + tl.dot(b_k * tl.exp(b_g_last - b_gc)[None, :], b_v)
    tl.store(ht + i_nh * K * V + o_k[:, None] * V + o_v[None, :], b_h, mask=m_h)


@triton.jit
def chunk_fwd_kernel_o(
    q, k, v, g, h, o, scale, T,
    H: tl.constexpr, K: tl.constexpr, V: tl.constexpr, BT: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr,
):
    i_v, i_t, i_nh = tl.program_id(0).to(tl.int64), tl.program_id(1).to(tl.int64), tl.program_id(2).to(tl.int64)
    i_n, i_h = i_nh // H, i_nh % H
    NT = tl.cdiv(T, BT)
    o_k = tl.arange(0, BK)
    o_v = i_v * BV + tl.arange(0, BV)
    o_t = i_t * BT + tl.arange(0, BT)
    m_k, m_v, m_t = o_k < K, o_v < V, o_t < T

    # [BT, BK], [BK, BT], [BT, BV]
    b_q = tl.load(q + ((i_n * T + o_t[:, None]) * H + i_h) * K + o_k[None, :], mask=m_t[:, None] & m_k[None, :], other=0).to(tl.float32)
    b_k = tl.load(k + ((i_n * T + o_t[None, :]) * H + i_h) * K + o_k[:, None], mask=m_k[:, None] & m_t[None, :], other=0).to(tl.float32)
    b_v = tl.load(v + ((i_n * T + o_t[:, None]) * H + i_h) * V + o_v[None, :], mask=m_t[:, None] & m_v[None, :], other=0).to(tl.float32)
    b_gc = tl.cumsum(tl.load(g + (i_n * T + o_t) * H + i_h, mask=m_t, other=0), 0)
    # [BK, BV]: the checkpointed state entering this chunk
    b_h = tl.load(h + ((i_n * NT + i_t) * H + i_h) * K * V + o_k[:, None] * V + o_v[None, :], mask=m_k[:, None] & m_v[None, :], other=0)
    # inter-chunk: what the earlier chunks left in the state, decayed to each token
    b_o = tl.dot(b_q, b_h) * tl.exp(b_gc)[:, None]
    # intra-chunk: causal attention with relative decay, [BT, BT]
    m_A = (o_t[:, None] >= o_t[None, :]) & m_t[:, None]
    b_A = tl.where(m_A, tl.dot(b_q, b_k) * tl.exp(b_gc[:, None] - b_gc[None, :]), 0)
    b_o = (b_o + tl.dot(b_A, b_v)) * scale
    tl.store(o + ((i_n * T + o_t[:, None]) * H + i_h) * V + o_v[None, :], b_o, mask=m_t[:, None] & m_v[None, :])


def gla_fwd(q, k, v, g):
    B, T, H, K, V = *q.shape, v.shape[-1]
    # FLA uses BT = 64; 16 keeps the interpreted example small
    BT = 16
    NT = triton.cdiv(T, BT)
    BK, BV = max(16, triton.next_power_of_2(K)), min(32, max(16, triton.next_power_of_2(V)))
    NV = triton.cdiv(V, BV)
    h = torch.empty(B, NT, H, K, V, dtype=torch.float32, device=q.device)
    ht = torch.empty(B, H, K, V, dtype=torch.float32, device=q.device)
    o = torch.empty(B, T, H, V, dtype=torch.float32, device=q.device)
    chunk_fwd_kernel_h[(NV, B * H)](k, v, g, h, ht, T, H=H, K=K, V=V, BT=BT, BK=BK, BV=BV)
    chunk_fwd_kernel_o[(NV, NT, B * H)](q, k, v, g, h, o, K**-0.5, T, H=H, K=K, V=V, BT=BT, BK=BK, BV=BV)
    return o, ht
