# a page-table walk one page per iteration, `range(NT)` over tiles (vLLM/SGLang paged decode)
import torch
import triton
import triton.language as tl


@triton.jit
def paged_decode_fwd_kernel(
    q, k_cache, v_cache, page_table, seq_lens, o_part, lse, scale, MAX_PAGES,
    H: tl.constexpr, HKV: tl.constexpr, D: tl.constexpr, PAGE: tl.constexpr, NUM_SPLITS: tl.constexpr,
):
    i_b, i_h, i_s = tl.program_id(0).to(tl.int64), tl.program_id(1).to(tl.int64), tl.program_id(2).to(tl.int64)
    i_hkv = i_h // (H // HKV)
    o_d = tl.arange(0, D)
    o_p = tl.arange(0, PAGE)
    seq_len = tl.load(seq_lens + i_b)
    split_len = tl.cdiv(tl.cdiv(seq_len, PAGE), NUM_SPLITS)
    start = i_s * split_len
    end = tl.minimum(start + split_len, tl.cdiv(seq_len, PAGE))
    if end > start:
        b_q = tl.load(q + (i_b * H + i_h) * D + o_d).to(tl.float32) * scale
        b_m = float("-inf")
        b_l = 0.0
        b_acc = tl.zeros([D], dtype=tl.float32)
        for i_page in range(start, end):
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
        i_bhs = (i_b * H + i_h) * NUM_SPLITS + i_s
        tl.store(o_part + i_bhs * D + o_d, b_acc / b_l)
        tl.store(lse + i_bhs, b_m + tl.log(b_l))


@triton.jit
def paged_decode_merge_kernel(
    o_part, lse, seq_lens, o,
    H: tl.constexpr, D: tl.constexpr, PAGE: tl.constexpr, NUM_SPLITS: tl.constexpr,
):
    i_b, i_h = tl.program_id(0).to(tl.int64), tl.program_id(1).to(tl.int64)
    o_d = tl.arange(0, D)
    seq_len = tl.load(seq_lens + i_b)
    # the same split lengths as paged_decode_fwd_kernel: its empty splits wrote nothing and are skipped
    split_len = tl.cdiv(tl.cdiv(seq_len, PAGE), NUM_SPLITS)
    b_m = float("-inf")
    b_l = 0.0
    b_acc = tl.zeros([D], dtype=tl.float32)
    for i_s in tl.static_range(NUM_SPLITS):
        if i_s * split_len < tl.cdiv(seq_len, PAGE):
            i_bhs = (i_b * H + i_h) * NUM_SPLITS + i_s
            b_lse = tl.load(lse + i_bhs)
            b_m_new = tl.maximum(b_m, b_lse)
            b_r = tl.exp(b_m - b_m_new)
            b_w = tl.exp(b_lse - b_m_new)
            b_acc = b_acc * b_r + b_w * tl.load(o_part + i_bhs * D + o_d)
            b_l = b_l * b_r + b_w
            b_m = b_m_new
    tl.store(o + (i_b * H + i_h) * D + o_d, (b_acc / b_l).to(o.dtype.element_ty))


def _num_sms(device: torch.device) -> int:
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return 132  # the H200 this split targets; the interpreter has no SMs


def paged_decode(q, k_cache, v_cache, page_table, seq_lens):
    B, H, D = q.shape
    o = torch.empty_like(q)
    PAGE = k_cache.shape[1]
    # split the KV range until the B*H*num_splits programs give every SM about 64:
    # short programs in many waves, so the last wave's idle SMs cost little
    num_splits = max(1, min(16, triton.cdiv(64 * _num_sms(o.device), B * H)))
    o_part = torch.empty(B, H, num_splits, D, dtype=torch.float32, device=o.device)
    lse = torch.empty(B, H, num_splits, dtype=torch.float32, device=o.device)
    paged_decode_fwd_kernel[(B, H, num_splits)](
        q, k_cache, v_cache, page_table, seq_lens, o_part, lse, D**-0.5, page_table.shape[1],
        H=H, HKV=k_cache.shape[2], D=D, PAGE=PAGE, NUM_SPLITS=num_splits,
    )
    paged_decode_merge_kernel[(B, H)](o_part, lse, seq_lens, o, H=H, D=D, PAGE=PAGE, NUM_SPLITS=num_splits)
    return o
