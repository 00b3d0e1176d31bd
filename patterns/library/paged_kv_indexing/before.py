"""Decode attention over a paged KV cache: o[b, h] = softmax(q·Kᵀ·scale)·V.

The cache holds pages of PAGE tokens ([num_pages·PAGE, H, D]); page_table[b]
lists the pages of request b. The launcher gathers each request's pages into
a contiguous [B, T_max, H, D] copy of K and V, then the kernel walks it.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def decode_attn_fwd_kernel(q, k, v, seq_lens, o, scale, T, H: tl.constexpr, D: tl.constexpr, BT: tl.constexpr):
    i_b, i_h = tl.program_id(0).to(tl.int64), tl.program_id(1).to(tl.int64)
    o_d = tl.arange(0, D)
    seq_len = tl.load(seq_lens + i_b)
    b_q = tl.load(q + (i_b * H + i_h) * D + o_d)
    b_m = tl.full([], float('-inf'), dtype=tl.float32)
    b_l = tl.zeros([], dtype=tl.float32)
    b_o = tl.zeros([D], dtype=tl.float32)
    for i_t in range(0, seq_len, BT):
        o_t = i_t + tl.arange(0, BT)
        m_t = o_t < seq_len
        # [BT, D]
        b_k = tl.load(k + ((i_b * T + o_t[:, None]) * H + i_h) * D + o_d[None, :], mask=m_t[:, None], other=0.0)
        b_v = tl.load(v + ((i_b * T + o_t[:, None]) * H + i_h) * D + o_d[None, :], mask=m_t[:, None], other=0.0)
        b_s = tl.where(m_t, tl.sum(b_k * b_q[None, :], 1) * scale, float('-inf'))
        b_m, b_mp = tl.maximum(b_m, tl.max(b_s, 0)), b_m
        b_r = tl.exp(b_mp - b_m)
        b_p = tl.exp(b_s - b_m)
        b_l = b_l * b_r + tl.sum(b_p, 0)
        b_o = b_o * b_r + tl.sum(b_p[:, None] * b_v, 0)
    tl.store(o + (i_b * H + i_h) * D + o_d, b_o / b_l)


def paged_decode(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, page_table: torch.Tensor,
                 seq_lens: torch.Tensor, PAGE: int) -> torch.Tensor:
    B, H, D = q.shape
    # every page of every request, copied out of the cache each step: [B, MAX_PAGES·PAGE, H, D]
    rows = (page_table.long()[:, :, None] * PAGE + torch.arange(PAGE, device=q.device)).flatten(1)
    k, v = k_cache[rows].contiguous(), v_cache[rows].contiguous()
    o = torch.empty_like(q)
    decode_attn_fwd_kernel[(B, H)](q, k, v, seq_lens, o, D ** -0.5, rows.shape[1], H=H, D=D, BT=16)
    return o
