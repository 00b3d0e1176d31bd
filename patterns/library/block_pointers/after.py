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

    # [BT, BV]
    b_o = tl.zeros([BT, BV], dtype=tl.float32)
    p_q = tl.make_block_ptr(q, (T, K), (H * K, 1), (i_t * BT, 0), (BT, BK), (1, 0))
    p_h = tl.make_block_ptr(h, (K, V), (V, 1), (0, i_v * BV), (BK, BV), (1, 0))
    for _ in range(tl.cdiv(K, BK)):
        # [BT, BK]
        b_q = tl.load(p_q, boundary_check=(0, 1), padding_option="zero")
        # [BK, BV]
        b_h = tl.load(p_h, boundary_check=(0, 1), padding_option="zero")
        b_o = tl.dot(b_q, b_h, b_o)
        p_q = tl.advance(p_q, (0, BK))
        p_h = tl.advance(p_h, (BK, 0))
    p_o = tl.make_block_ptr(o, (T, V), (H * V, 1), (i_t * BT, i_v * BV), (BT, BV), (1, 0))
    tl.store(p_o, (b_o * scale).to(o.dtype.element_ty), boundary_check=(0, 1))


def chunk_o_fwd(q: torch.Tensor, h: torch.Tensor, chunk_size: int = 64) -> torch.Tensor:
    B, T, H, K = q.shape
    NT, V = h.shape[1], h.shape[-1]
    BT = chunk_size
    BK, BV = 32, 32
    o = torch.empty(B, T, H, V, device=q.device, dtype=q.dtype)
    grid = (triton.cdiv(V, BV), NT, B * H)
    chunk_o_fwd_kernel[grid](q, h, o, K**-0.5, T, H=H, K=K, V=V, BT=BT, BK=BK, BV=BV)
    return o
