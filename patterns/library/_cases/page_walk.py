# a page-table walk one page per iteration, `range(NT)` over tiles (vLLM/SGLang paged decode)
import torch
import triton
import triton.language as tl


@triton.jit
def paged_decode_fwd_kernel(
    q, k_cache, v_cache, page_table, seq_lens, o, scale, MAX_PAGES,
    H: tl.constexpr, HKV: tl.constexpr, D: tl.constexpr, PAGE: tl.constexpr,
):
    i_b, i_h = tl.program_id(0).to(tl.int64), tl.program_id(1).to(tl.int64)
    i_hkv = i_h // (H // HKV)
    o_d = tl.arange(0, D)
    o_p = tl.arange(0, PAGE)
    seq_len = tl.load(seq_lens + i_b)
    b_q = tl.load(q + (i_b * H + i_h) * D + o_d).to(tl.float32) * scale
    b_m = float("-inf")
    b_l = 0.0
    b_acc = tl.zeros([D], dtype=tl.float32)
    for i_page in range(tl.cdiv(seq_len, PAGE)):
        page = tl.load(page_table + i_b * MAX_PAGES + i_page).to(tl.int64)
        m_t = i_page * PAGE + o_p < seq_len
        p_kv = ((page * PAGE + o_p[:, None]) * HKV + i_hkv) * D + o_d[None, :]
        b_s = tl.where(m_t, tl.sum(tl.load(k_cache + p_kv, mask=m_t[:, None], other=0.0).to(tl.float32) * b_q[None, :], 1), float("-inf"))
        b_m_new = tl.maximum(b_m, tl.max(b_s, 0))
        b_p = tl.exp(b_s - b_m_new)
        b_alpha = tl.exp(b_m - b_m_new)
        b_acc = b_acc * b_alpha + tl.sum(b_p[:, None] * tl.load(v_cache + p_kv, mask=m_t[:, None], other=0.0).to(tl.float32), 0)
        b_l = b_l * b_alpha + tl.sum(b_p, 0)
        b_m = b_m_new
    tl.store(o + (i_b * H + i_h) * D + o_d, (b_acc / b_l).to(o.dtype.element_ty))


def paged_decode(q, k_cache, v_cache, page_table, seq_lens):
    B, H, D = q.shape
    o = torch.empty_like(q)
    paged_decode_fwd_kernel[(B, H)](
        q, k_cache, v_cache, page_table, seq_lens, o, D**-0.5, page_table.shape[1],
        H=H, HKV=k_cache.shape[2], D=D, PAGE=k_cache.shape[1],
    )
    return o
