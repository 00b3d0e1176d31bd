"""Paged-KV decode attention (MHA): one program per (request, head) walks every page of its sequence."""
import torch
import triton
import triton.language as tl


@triton.jit
def paged_decode_fwd_kernel(q, k_cache, v_cache, page_table, seq_lens, o, scale, MAX_PAGES, H: tl.constexpr, D: tl.constexpr, PAGE: tl.constexpr):
    i_b, i_h = tl.program_id(0).to(tl.int64), tl.program_id(1).to(tl.int64)
    o_d = tl.arange(0, D)
    o_p = tl.arange(0, PAGE)
    seq_len = tl.load(seq_lens + i_b)
    b_q = tl.load(q + (i_b * H + i_h) * D + o_d).to(tl.float32)
    b_m = float("-inf")
    b_l = 0.0
    b_acc = tl.zeros([D], dtype=tl.float32)
    for i_page in range(0, tl.cdiv(seq_len, PAGE)):
        page = tl.load(page_table + i_b * MAX_PAGES + i_page).to(tl.int64)
        o_t = i_page * PAGE + o_p
        m_t = o_t < seq_len
        b_k = tl.load(k_cache + ((page * PAGE + o_p[:, None]) * H + i_h) * D + o_d[None, :], mask=m_t[:, None], other=0.0).to(tl.float32)
        b_s = tl.where(m_t, tl.sum(b_k * b_q[None, :], axis=1) * scale, float("-inf"))
        b_m_new = tl.maximum(b_m, tl.max(b_s, axis=0))
        b_p = tl.exp(b_s - b_m_new)
        b_alpha = tl.exp(b_m - b_m_new)
        b_v = tl.load(v_cache + ((page * PAGE + o_p[:, None]) * H + i_h) * D + o_d[None, :], mask=m_t[:, None], other=0.0).to(tl.float32)
        b_acc = b_acc * b_alpha + tl.sum(b_p[:, None] * b_v, axis=0)
        b_l = b_l * b_alpha + tl.sum(b_p, axis=0)
        b_m = b_m_new
    tl.store(o + (i_b * H + i_h) * D + o_d, b_acc / b_l)


def paged_decode(q, k_cache, v_cache, page_table, seq_lens):
    B, H, D = q.shape
    o = torch.empty_like(q)
    paged_decode_fwd_kernel[(B, H)](q, k_cache, v_cache, page_table, seq_lens, o, D**-0.5, page_table.shape[1], H=H, D=D, PAGE=16)
    return o
