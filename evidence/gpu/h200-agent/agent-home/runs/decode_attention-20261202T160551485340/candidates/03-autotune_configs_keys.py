"""Decode attention, baseline: one program per (sequence, query head) over the whole KV cache.

No KV split: a batch of B sequences launches B * HQ programs however long the
context, and the HQ // HK query heads of a group each reload their shared
key/value head.
"""
import torch
import triton
import triton.language as tl


@triton.autotune(
    configs=[
        triton.Config({'BN': 64}, num_warps=4, num_stages=3),  # the launcher's fixed setting
        triton.Config({'BN': 64}, num_warps=4, num_stages=4),
        triton.Config({'BN': 128}, num_warps=4, num_stages=4),
        triton.Config({'BN': 128}, num_warps=8, num_stages=3),
    ],
    key=['S', 'MAX_PAGES', 'HQ', 'HK', 'D', 'PAGE_SIZE'],
)
@triton.jit
def decode_attention_fwd_kernel(
    q,
    k,
    v,
    seq_lens,
    page_table,
    o,
    lse,
    scale,
    S,
    MAX_PAGES,
    HQ: tl.constexpr,
    HK: tl.constexpr,
    D: tl.constexpr,
    PAGE_SIZE: tl.constexpr,
    PAGED: tl.constexpr,
    BN: tl.constexpr,
    BD: tl.constexpr,
):
    i_bh = tl.program_id(0).to(tl.int64)
    i_b, i_hq = i_bh // HQ, i_bh % HQ
    i_hk = i_hq // (HQ // HK)

    o_d = tl.arange(0, BD)
    m_d = o_d < D
    # [BD]
    b_q = tl.load(q + i_bh * D + o_d, mask=m_d, other=0.).to(tl.float32) * scale
    seq_len = tl.load(seq_lens + i_b)

    b_m = tl.full([], float('-inf'), dtype=tl.float32)
    b_l = tl.zeros([], dtype=tl.float32)
    b_acc = tl.zeros([BD], dtype=tl.float32)
    for i_n in range(0, seq_len, BN):
        o_n = i_n + tl.arange(0, BN)
        m_n = o_n < seq_len
        if PAGED:
            i_p = tl.load(page_table + i_b * MAX_PAGES + o_n // PAGE_SIZE, mask=m_n, other=0).to(tl.int64)
            o_row = i_p * PAGE_SIZE + o_n % PAGE_SIZE
        else:
            o_row = i_b * S + o_n
        p_kv = (o_row[:, None] * HK + i_hk) * D + o_d[None, :]
        m_kv = m_n[:, None] & m_d[None, :]
        # [BN, BD]
        b_k = tl.load(k + p_kv, mask=m_kv, other=0.).to(tl.float32)
        b_v = tl.load(v + p_kv, mask=m_kv, other=0.).to(tl.float32)
        # [BN]
        b_s = tl.where(m_n, tl.sum(b_k * b_q[None, :], 1), float('-inf'))
        b_m_new = tl.maximum(b_m, tl.max(b_s, 0))
        b_alpha = tl.exp(b_m - b_m_new)
        b_p = tl.exp(b_s - b_m_new)
        b_acc = b_acc * b_alpha + tl.sum(b_p[:, None] * b_v, 0)
        b_l = b_l * b_alpha + tl.sum(b_p, 0)
        b_m = b_m_new
    # an empty sequence gives o = 0 and lse = -inf
    b_ls = tl.where(b_l > 0, b_l, 1.)
    tl.store(o + i_bh * D + o_d, (b_acc / b_ls).to(o.dtype.element_ty), mask=m_d)
    tl.store(lse + i_bh, tl.where(b_l > 0, b_m + tl.log(b_ls), float('-inf')))


def decode_attention(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    seq_lens: torch.Tensor,
    page_table: torch.Tensor | None = None,
    scale: float | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Single-query attention over a contiguous `[B, S, HK, D]` or paged `[P, PAGE, HK, D]` cache.

    Returns o `[B, HQ, D]` in q.dtype and lse `[B, HQ]` fp32 (natural log).
    """
    B, HQ, D = q.shape
    HK = k_cache.shape[2]
    assert HQ % HK == 0, f"HQ={HQ} must be a multiple of HK={HK}"
    assert k_cache.shape == v_cache.shape and k_cache.shape[-1] == D
    assert all(x.is_contiguous() for x in (q, k_cache, v_cache, seq_lens))
    PAGED = page_table is not None
    if PAGED:
        assert page_table.is_contiguous() and page_table.shape[0] == B
    else:
        assert k_cache.shape[0] == B
    if scale is None:
        scale = D ** -0.5
    o = torch.empty_like(q)
    lse = torch.empty(B, HQ, dtype=torch.float32, device=q.device)
    decode_attention_fwd_kernel[(B * HQ,)](
        q, k_cache, v_cache, seq_lens, page_table if PAGED else seq_lens, o, lse,
        scale, k_cache.shape[1], page_table.shape[1] if PAGED else 0,
        HQ=HQ, HK=HK, D=D, PAGE_SIZE=k_cache.shape[1] if PAGED else 1, PAGED=PAGED,
        BD=triton.next_power_of_2(D),
    )
    return o, lse
