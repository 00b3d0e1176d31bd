"""Decode attention over a paged KV cache: o[b, h] = softmax(q·Kᵀ·scale)·V.

The cache holds pages of PAGE tokens ([num_pages·PAGE, H, D]); page_table[b]
lists the pages of request b. The kernel walks the request's pages in order:
per tile of PAGE tokens it loads the page id from the table and reads K and V
straight from the cache, so no contiguous copy is made.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def paged_decode_fwd_kernel(q, k_cache, v_cache, page_table, seq_lens, o, scale, MAX_PAGES, H: tl.constexpr, D: tl.constexpr,
                            PAGE: tl.constexpr):
    i_b, i_h = tl.program_id(0).to(tl.int64), tl.program_id(1).to(tl.int64)
    o_d = tl.arange(0, D)
    o_p = tl.arange(0, PAGE)
    seq_len = tl.load(seq_lens + i_b)
    b_q = tl.load(q + (i_b * H + i_h) * D + o_d)
    b_m = tl.full([], float('-inf'), dtype=tl.float32)
    b_l = tl.zeros([], dtype=tl.float32)
    b_o = tl.zeros([D], dtype=tl.float32)
    for i_p in range(0, tl.cdiv(seq_len, PAGE)):
        # the physical page of this request's i_p-th page
        page = tl.load(page_table + i_b * MAX_PAGES + i_p).to(tl.int64)
        o_t = i_p * PAGE + o_p
        m_t = o_t < seq_len
        # [PAGE, D]
        b_k = tl.load(k_cache + ((page * PAGE + o_p[:, None]) * H + i_h) * D + o_d[None, :], mask=m_t[:, None], other=0.0)
        b_v = tl.load(v_cache + ((page * PAGE + o_p[:, None]) * H + i_h) * D + o_d[None, :], mask=m_t[:, None], other=0.0)
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
    o = torch.empty_like(q)
    paged_decode_fwd_kernel[(B, H)](q, k_cache, v_cache, page_table, seq_lens, o, D ** -0.5, page_table.shape[1], H=H, D=D, PAGE=PAGE)
    return o
