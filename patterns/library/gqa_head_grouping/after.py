"""GQA decode attention: HQ = G * HKV query heads share HKV KV heads.

One program per (sequence, query head): the G programs of a KV group each load
the same K and V tiles, so the cache is requested G times.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def gqa_decode_attention_fwd_kernel(
    q, k_cache, v_cache, seq_lens, o, scale, N,
    HQ: tl.constexpr, HKV: tl.constexpr, G: tl.constexpr, D: tl.constexpr, BD: tl.constexpr, BLOCK_N: tl.constexpr,
    BG: tl.constexpr,
):
    i_b, i_h = tl.program_id(0).to(tl.int64), tl.program_id(1).to(tl.int64)
    # the query heads of KV head i_h, padded to BG rows: [BG]
    o_hq = i_h * G + tl.arange(0, BG)
    m_g = tl.arange(0, BG) < G
    o_d = tl.arange(0, BD)
    m_d = o_d < D
    seq_len = tl.load(seq_lens + i_b)

    b_q = tl.load(q + (i_b * HQ + o_hq[:, None]) * D + o_d[None, :], mask=m_g[:, None] & m_d[None, :], other=0).to(tl.float32) * scale
    b_m = tl.full([BG], float("-inf"), dtype=tl.float32)
    b_s = tl.zeros([BG], dtype=tl.float32)
    # [BG, BD]
    b_acc = tl.zeros([BG, BD], dtype=tl.float32)
    for i_n in range(0, seq_len, BLOCK_N):
        o_n = i_n + tl.arange(0, BLOCK_N)
        m_n = o_n < seq_len
        p_kv = ((i_b * N + o_n[:, None]) * HKV + i_h) * D + o_d[None, :]
        # [BLOCK_N, BD]
        b_k = tl.load(k_cache + p_kv, mask=m_n[:, None] & m_d[None, :], other=0).to(tl.float32)
        b_v = tl.load(v_cache + p_kv, mask=m_n[:, None] & m_d[None, :], other=0).to(tl.float32)
        b_qk = tl.where(m_n[None, :], tl.dot(b_q, tl.trans(b_k)), float("-inf"))
        b_m_new = tl.maximum(b_m, tl.max(b_qk, 1))
        b_r = tl.exp(b_m - b_m_new)
        b_p = tl.exp(b_qk - b_m_new[:, None])
        b_acc = b_acc * b_r[:, None] + tl.dot(b_p, b_v)
        b_s = b_s * b_r + tl.sum(b_p, 1)
        b_m = b_m_new
    tl.store(o + (i_b * HQ + o_hq[:, None]) * D + o_d[None, :], b_acc / b_s[:, None], mask=m_g[:, None] & m_d[None, :])


def gqa_decode_attention(q, k_cache, v_cache, seq_lens):
    B, HQ, D = q.shape
    N, HKV = k_cache.shape[1], k_cache.shape[2]
    o = torch.empty(B, HQ, D, dtype=torch.float32, device=q.device)
    # tl.dot needs at least 16 rows: a group of query heads is padded to BG, the padding masked
    BG = max(16, triton.next_power_of_2(HQ // HKV))
    gqa_decode_attention_fwd_kernel[(B, HKV)](
        q, k_cache, v_cache, seq_lens, o, D**-0.5, N,
        HQ=HQ, HKV=HKV, G=HQ // HKV, D=D, BD=max(16, triton.next_power_of_2(D)), BLOCK_N=32, BG=BG,
    )
    return o
