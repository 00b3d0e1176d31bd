# a page-table walk one page per iteration, `range(NT)` over tiles (vLLM/SGLang paged decode)
import torch
import triton
import triton.language as tl


@triton.jit
def paged_decode_fwd_kernel(
    q, k_cache, v_cache, page_table, seq_lens, o, scale, MAX_PAGES,
    H: tl.constexpr, HKV: tl.constexpr, D: tl.constexpr, PAGE: tl.constexpr,
    G: tl.constexpr,
    BG: tl.constexpr,
):
    i_b, i_hkv = tl.program_id(0).to(tl.int64), tl.program_id(1).to(tl.int64)
    # the query heads of KV head i_hkv, padded to BG rows: [BG]
    o_h = i_hkv * G + tl.arange(0, BG)
    m_g = tl.arange(0, BG) < G
    o_d = tl.arange(0, D)
    o_p = tl.arange(0, PAGE)
    seq_len = tl.load(seq_lens + i_b)
    b_q = tl.load(q + (i_b * H + o_h[:, None]) * D + o_d[None, :], mask=m_g[:, None]).to(tl.float32) * scale
    b_m = tl.full([BG], float("-inf"), dtype=tl.float32)
    b_l = tl.zeros([BG], dtype=tl.float32)
    b_acc = tl.zeros([BG, D], dtype=tl.float32)
    for i_page in range(tl.cdiv(seq_len, PAGE)):
        page = tl.load(page_table + i_b * MAX_PAGES + i_page).to(tl.int64)
        m_t = i_page * PAGE + o_p < seq_len
        p_kv = ((page * PAGE + o_p[:, None]) * HKV + i_hkv) * D + o_d[None, :]
        b_s = tl.where(m_t[None, :], tl.dot(b_q, tl.trans(tl.load(k_cache + p_kv, mask=m_t[:, None], other=0.0).to(tl.float32))), float("-inf"))
        b_m_new = tl.maximum(b_m, tl.max(b_s, 1))
        b_p = tl.exp(b_s - b_m_new[:, None])
        b_alpha = tl.exp(b_m - b_m_new)
        b_acc = b_acc * b_alpha[:, None] + tl.dot(b_p, tl.load(v_cache + p_kv, mask=m_t[:, None], other=0.0).to(tl.float32))
        b_l = b_l * b_alpha + tl.sum(b_p, 1)
        b_m = b_m_new
    tl.store(o + (i_b * H + o_h[:, None]) * D + o_d[None, :], (b_acc / b_l[:, None]).to(o.dtype.element_ty), mask=m_g[:, None])


def paged_decode(q, k_cache, v_cache, page_table, seq_lens):
    B, H, D = q.shape
    o = torch.empty_like(q)
    # tl.dot needs at least 16 rows: a group of query heads is padded to BG, the padding masked
    BG = max(16, triton.next_power_of_2(H // k_cache.shape[2]))
    paged_decode_fwd_kernel[(B, k_cache.shape[2])](
        q, k_cache, v_cache, page_table, seq_lens, o, D**-0.5, page_table.shape[1],
        H=H, HKV=k_cache.shape[2], D=D, PAGE=k_cache.shape[1], G=H // k_cache.shape[2], BG=BG,
    )
    return o
