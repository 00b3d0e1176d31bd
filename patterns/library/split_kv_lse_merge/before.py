"""Decode attention: one query token per sequence against its KV cache.

One program per (sequence, head) walks the whole KV range with an online
softmax. At batch 1 with 32 heads that is 32 programs streaming a long cache.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def decode_attention_fwd_kernel(
    q, k_cache, v_cache, seq_lens, o, scale, N,
    H: tl.constexpr, D: tl.constexpr, BD: tl.constexpr, BLOCK_N: tl.constexpr,
):
    i_b, i_h = tl.program_id(0).to(tl.int64), tl.program_id(1).to(tl.int64)
    o_d = tl.arange(0, BD)
    m_d = o_d < D
    seq_len = tl.load(seq_lens + i_b)

    b_q = tl.load(q + (i_b * H + i_h) * D + o_d, mask=m_d, other=0).to(tl.float32) * scale
    b_m = float("-inf")
    b_s = 0.0
    # [BD]
    b_acc = tl.zeros([BD], dtype=tl.float32)
    for i_n in range(0, seq_len, BLOCK_N):
        o_n = i_n + tl.arange(0, BLOCK_N)
        m_n = o_n < seq_len
        p_kv = ((i_b * N + o_n[:, None]) * H + i_h) * D + o_d[None, :]
        # [BLOCK_N, BD]
        b_k = tl.load(k_cache + p_kv, mask=m_n[:, None] & m_d[None, :], other=0).to(tl.float32)
        b_v = tl.load(v_cache + p_kv, mask=m_n[:, None] & m_d[None, :], other=0).to(tl.float32)
        b_qk = tl.where(m_n, tl.sum(b_q[None, :] * b_k, 1), float("-inf"))
        b_m_new = tl.maximum(b_m, tl.max(b_qk, 0))
        b_r = tl.exp(b_m - b_m_new)
        b_p = tl.exp(b_qk - b_m_new)
        b_acc = b_acc * b_r + tl.sum(b_p[:, None] * b_v, 0)
        b_s = b_s * b_r + tl.sum(b_p, 0)
        b_m = b_m_new
    tl.store(o + (i_b * H + i_h) * D + o_d, b_acc / b_s, mask=m_d)


def decode_attention(q, k_cache, v_cache, seq_lens):
    B, H, D = q.shape
    N = k_cache.shape[1]
    o = torch.empty(B, H, D, dtype=torch.float32, device=q.device)
    decode_attention_fwd_kernel[(B, H)](
        q, k_cache, v_cache, seq_lens, o, D**-0.5, N, H=H, D=D, BD=triton.next_power_of_2(D), BLOCK_N=32
    )
    return o
