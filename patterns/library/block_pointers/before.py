"""Inter-chunk output of chunked linear attention: o_t = scale * q_t @ h_[t // BT].

q is [B, T, H, K], the per-chunk states h are [B, NT, H, K, V]. Every tile is
addressed by hand: row/column offsets, a pointer grid and a mask per load.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def chunk_o_fwd_kernel(
    q, h, o, scale, T,
    H: tl.constexpr, K: tl.constexpr, V: tl.constexpr,
    BT: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr,
):
    i_v, i_t, i_bh = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    i_b, i_h = i_bh // H, i_bh % H
    NT = tl.cdiv(T, BT)
    q += (i_b * T * H + i_h).to(tl.int64) * K
    o += (i_b * T * H + i_h).to(tl.int64) * V
    h += ((i_b * NT + i_t) * H + i_h).to(tl.int64) * K * V

    o_t = i_t * BT + tl.arange(0, BT)
    o_v = i_v * BV + tl.arange(0, BV)
    m_t, m_v = o_t < T, o_v < V
    # [BT, BV]
    b_o = tl.zeros([BT, BV], dtype=tl.float32)
    for i_k in range(tl.cdiv(K, BK)):
        o_k = i_k * BK + tl.arange(0, BK)
        m_k = o_k < K
        # [BT, BK]
        b_q = tl.load(q + o_t[:, None] * (H * K) + o_k[None, :], mask=m_t[:, None] & m_k[None, :], other=0.0)
        # [BK, BV]
        b_h = tl.load(h + o_k[:, None] * V + o_v[None, :], mask=m_k[:, None] & m_v[None, :], other=0.0)
        b_o = tl.dot(b_q, b_h, b_o)
    tl.store(o + o_t[:, None] * (H * V) + o_v[None, :], (b_o * scale).to(o.dtype.element_ty), mask=m_t[:, None] & m_v[None, :])


def chunk_o_fwd(q: torch.Tensor, h: torch.Tensor, chunk_size: int = 64) -> torch.Tensor:
    B, T, H, K = q.shape
    NT, V = h.shape[1], h.shape[-1]
    BT = chunk_size
    BK, BV = 32, 32
    o = torch.empty(B, T, H, V, device=q.device, dtype=q.dtype)
    grid = (triton.cdiv(V, BV), NT, B * H)
    chunk_o_fwd_kernel[grid](q, h, o, K**-0.5, T, H=H, K=K, V=V, BT=BT, BK=BK, BV=BV)
    return o
