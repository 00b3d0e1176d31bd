"""Decode attention, baseline: one program per (sequence, query head) over the whole KV cache.

No KV split: a batch of B sequences launches B * HQ programs however long the
context, and the HQ // HK query heads of a group each reload their shared
key/value head.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def decode_attention_fwd_kernel(
    q,
    k,
    v,
    seq_lens,
    page_table,
    o_part, lse_part,
    scale,
    S,
    MAX_PAGES,
    HQ: tl.constexpr,
    HK: tl.constexpr,
    D: tl.constexpr,
    PAGE_SIZE: tl.constexpr,
    PAGED: tl.constexpr,
    BN: tl.constexpr,
    BD: tl.constexpr, NUM_SPLITS: tl.constexpr, G: tl.constexpr, BG: tl.constexpr, LOWP: tl.constexpr,
):
    i_bk, i_s = tl.program_id(0).to(tl.int64), tl.program_id(1).to(tl.int64)
    i_b, i_hk = i_bk // HK, i_bk % HK
    o_g = tl.arange(0, BG)
    m_g = o_g < G
    i_bh = i_b * HQ + i_hk * G + o_g

    o_d = tl.arange(0, BD)
    m_d = o_d < D
    m_gd = m_g[:, None] & m_d[None, :]
    b_q = tl.load(q + i_bh[:, None] * D + o_d[None, :], mask=m_gd, other=0.).to(tl.float32) * scale
    if LOWP:
        b_q = b_q.to(k.dtype.element_ty)
    seq_len = tl.load(seq_lens + i_b)
    split_len = tl.cdiv(tl.cdiv(seq_len, NUM_SPLITS), BN) * BN
    start = i_s * split_len
    end = tl.minimum(start + split_len, seq_len)
    if end > start:
        b_m = tl.full([BG], float('-inf'), dtype=tl.float32)
        b_l = tl.zeros([BG], dtype=tl.float32)
        b_acc = tl.zeros([BG, BD], dtype=tl.float32)
        for i_n in range(start, end, BN):
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
            b_k = tl.load(k + p_kv, mask=m_kv, other=0.)
            b_v = tl.load(v + p_kv, mask=m_kv, other=0.)
            if not LOWP:
                b_k = b_k.to(tl.float32)
                b_v = b_v.to(tl.float32)
            b_s = tl.where(m_n[None, :], tl.dot(b_q, tl.trans(b_k)), float('-inf'))
            b_m_new = tl.maximum(b_m, tl.max(b_s, 1))
            b_alpha = tl.exp(b_m - b_m_new)
            b_p = tl.exp(b_s - b_m_new[:, None])
            b_acc = b_acc * b_alpha[:, None] + tl.dot(b_p.to(b_v.dtype), b_v)
            b_l = b_l * b_alpha + tl.sum(b_p, 1)
            b_m = b_m_new
        i_bhs = i_bh * NUM_SPLITS + i_s
        tl.store(o_part + i_bhs[:, None] * BD + o_d[None, :], b_acc / b_l[:, None], mask=m_gd)
        tl.store(lse_part + i_bhs, b_m + tl.log(b_l), mask=m_g)


@triton.jit
def decode_attention_merge_kernel(
    o_part, lse_part, seq_lens, o, lse,
    HQ: tl.constexpr, D: tl.constexpr, BN: tl.constexpr, BD: tl.constexpr, NUM_SPLITS: tl.constexpr,
):
    i_bh = tl.program_id(0).to(tl.int64)
    i_b, i_hq = i_bh // HQ, i_bh % HQ
    o_d = tl.arange(0, BD)
    m_d = o_d < D
    seq_len = tl.load(seq_lens + i_b)
    # the same split lengths as decode_attention_fwd_kernel: its empty splits wrote nothing and are skipped
    split_len = tl.cdiv(tl.cdiv(seq_len, NUM_SPLITS), BN) * BN
    b_m = float("-inf")
    b_l = 0.0
    b_acc = tl.zeros([BD], dtype=tl.float32)
    for i_s in tl.static_range(NUM_SPLITS):
        if i_s * split_len < seq_len:
            i_bhs = i_bh * NUM_SPLITS + i_s
            b_lse = tl.load(lse_part + i_bhs)
            b_m_new = tl.maximum(b_m, b_lse)
            b_r = tl.exp(b_m - b_m_new)
            b_w = tl.exp(b_lse - b_m_new)
            b_acc = b_acc * b_r + b_w * tl.load(o_part + i_bhs * BD + o_d, mask=m_d, other=0)
            b_l = b_l * b_r + b_w
            b_m = b_m_new
    # an empty sequence gives o = 0 and lse = -inf
    b_ls = tl.where(b_l > 0, b_l, 1.)
    tl.store(o + i_bh * D + o_d, (b_acc / b_ls).to(o.dtype.element_ty), mask=m_d)
    tl.store(lse + i_bh, tl.where(b_l > 0, b_m + tl.log(b_ls), float('-inf')))


LOWP, MAX_SPLITS, PER_SM, WARPS, STAGES = False, 16, 64, 4, 2


def _num_sms(device: torch.device) -> int:
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return 132  # the H200 this split targets; the interpreter has no SMs


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
    BN, BD = 64, triton.next_power_of_2(D)
    # split the KV range until the B*HQ*num_splits programs give every SM about 64:
    # short programs in many waves, so the last wave's idle SMs cost little
    G = HQ // HK
    num_splits = max(1, min(MAX_SPLITS, triton.cdiv(PER_SM * _num_sms(o.device), B * HK)))
    o_part = torch.empty(B * HQ, num_splits, BD, dtype=torch.float32, device=o.device)
    lse_part = torch.empty(B * HQ, num_splits, dtype=torch.float32, device=o.device)
    decode_attention_fwd_kernel[(B * HK, num_splits)](
        q, k_cache, v_cache, seq_lens, page_table if PAGED else seq_lens, o_part, lse_part,
        scale, k_cache.shape[1], page_table.shape[1] if PAGED else 0,
        HQ=HQ, HK=HK, D=D, PAGE_SIZE=k_cache.shape[1] if PAGED else 1, PAGED=PAGED,
        BN=BN, BD=BD,
        NUM_SPLITS=num_splits, G=G, BG=max(16, triton.next_power_of_2(G)), LOWP=LOWP, num_warps=WARPS, num_stages=STAGES,
    )
    decode_attention_merge_kernel[(B * HQ,)](o_part, lse_part, seq_lens, o, lse, HQ=HQ, D=D, BN=BN, BD=BD, NUM_SPLITS=num_splits)
    return o, lse
