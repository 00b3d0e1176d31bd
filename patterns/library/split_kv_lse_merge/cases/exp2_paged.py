# exp2 with the scale folded into log2(e), one flat (B*H,) grid, paged cache lengths
# loaded per sequence, a bf16 output cast in the store
import torch
import triton
import triton.language as tl


@triton.jit
def paged_decode_kernel(
    q, k_cache, v_cache, block_table, seq_lens, o, qk_scale, MAX_BLOCKS,
    H: tl.constexpr, D: tl.constexpr, BD: tl.constexpr, PAGE: tl.constexpr,
):
    i_bh = tl.program_id(0).to(tl.int64)
    i_b = i_bh // H
    o_d = tl.arange(0, BD)
    m_d = o_d < D
    seq_len = tl.load(seq_lens + i_b)
    # [BD], in log2 units
    b_q = tl.load(q + i_bh * D + o_d, mask=m_d, other=0).to(tl.float32) * qk_scale
    b_m = tl.full([], float("-inf"), dtype=tl.float32)
    b_l = tl.zeros([], dtype=tl.float32)
    b_acc = tl.zeros([BD], dtype=tl.float32)
    for i_n in tl.range(0, seq_len, PAGE, num_stages=2):
        o_n = i_n + tl.arange(0, PAGE)
        m_n = o_n < seq_len
        i_page = tl.load(block_table + i_b * MAX_BLOCKS + i_n // PAGE).to(tl.int64)
        p_kv = ((i_page * PAGE + tl.arange(0, PAGE)[:, None]) * H + i_bh % H) * D + o_d[None, :]
        b_k = tl.load(k_cache + p_kv, mask=m_n[:, None] & m_d[None, :], other=0).to(tl.float32)
        b_v = tl.load(v_cache + p_kv, mask=m_n[:, None] & m_d[None, :], other=0).to(tl.float32)
        b_s = tl.where(m_n, tl.sum(b_q[None, :] * b_k, 1), float("-inf"))
        b_m_new = tl.maximum(b_m, tl.max(b_s, 0))
        b_alpha = tl.exp2(b_m - b_m_new)
        b_p = tl.exp2(b_s - b_m_new)
        b_acc = b_acc * b_alpha + tl.sum(b_p[:, None] * b_v, 0)
        b_l = b_l * b_alpha + tl.sum(b_p, 0)
        b_m = b_m_new
    tl.store(o + i_bh * D + o_d, (b_acc / b_l).to(o.dtype.element_ty), mask=m_d)


def paged_decode(q, k_cache, v_cache, block_table, seq_lens):
    B, H, D = q.shape
    PAGE = k_cache.shape[1]
    o = torch.empty_like(q)
    paged_decode_kernel[(B * H,)](
        q, k_cache, v_cache, block_table, seq_lens, o, D**-0.5 * 1.4426950408889634, block_table.shape[1],
        H=H, D=D, BD=triton.next_power_of_2(D), PAGE=PAGE,
    )
    return o
