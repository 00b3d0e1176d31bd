"""Decode attention: one query token per sequence against its KV cache.

One program per (sequence, head) walks the whole KV range with an online
softmax. At batch 1 with 32 heads that is 32 programs streaming a long cache.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def decode_attention_fwd_kernel(
    q, k_cache, v_cache, seq_lens, o_part, lse, scale, N,
    H: tl.constexpr, D: tl.constexpr, BD: tl.constexpr, BLOCK_N: tl.constexpr, NUM_SPLITS: tl.constexpr,
):
    i_b, i_h, i_s = tl.program_id(0).to(tl.int64), tl.program_id(1).to(tl.int64), tl.program_id(2).to(tl.int64)
    o_d = tl.arange(0, BD)
    m_d = o_d < D
    seq_len = tl.load(seq_lens + i_b)
    split_len = tl.cdiv(tl.cdiv(seq_len, NUM_SPLITS), BLOCK_N) * BLOCK_N
    start = i_s * split_len
    end = tl.minimum(start + split_len, seq_len)
    if end > start:
        b_q = tl.load(q + (i_b * H + i_h) * D + o_d, mask=m_d, other=0).to(tl.float32) * scale
        b_m = float("-inf")
        b_s = 0.0
        # [BD]
        b_acc = tl.zeros([BD], dtype=tl.float32)
        for i_n in range(start, end, BLOCK_N):
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
        i_bhs = (i_b * H + i_h) * NUM_SPLITS + i_s
        tl.store(o_part + i_bhs * BD + o_d, b_acc / b_s, mask=m_d)
        tl.store(lse + i_bhs, b_m + tl.log(b_s))


@triton.jit
def decode_attention_merge_kernel(
    o_part, lse, seq_lens, o,
    H: tl.constexpr, D: tl.constexpr, BD: tl.constexpr, BLOCK_N: tl.constexpr, NUM_SPLITS: tl.constexpr,
):
    i_b, i_h = tl.program_id(0).to(tl.int64), tl.program_id(1).to(tl.int64)
    o_d = tl.arange(0, BD)
    m_d = o_d < D
    seq_len = tl.load(seq_lens + i_b)
    # the same split lengths as decode_attention_fwd_kernel: its empty splits wrote nothing and are skipped
    split_len = tl.cdiv(tl.cdiv(seq_len, NUM_SPLITS), BLOCK_N) * BLOCK_N
    b_m = float("-inf")
    b_s = 0.0
    b_acc = tl.zeros([BD], dtype=tl.float32)
    for i_s in tl.static_range(NUM_SPLITS):
        if i_s * split_len < seq_len:
            i_bhs = (i_b * H + i_h) * NUM_SPLITS + i_s
            b_lse = tl.load(lse + i_bhs)
            b_m_new = tl.maximum(b_m, b_lse)
            b_r = tl.exp(b_m - b_m_new)
            b_w = tl.exp(b_lse - b_m_new)
            b_acc = b_acc * b_r + b_w * tl.load(o_part + i_bhs * BD + o_d, mask=m_d, other=0)
            b_s = b_s * b_r + b_w
            b_m = b_m_new
    tl.store(o + (i_b * H + i_h) * D + o_d, b_acc / b_s, mask=m_d)


def _num_sms(device: torch.device) -> int:
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return 132  # the H200 this split targets; the interpreter has no SMs


def decode_attention(q, k_cache, v_cache, seq_lens):
    B, H, D = q.shape
    N = k_cache.shape[1]
    o = torch.empty(B, H, D, dtype=torch.float32, device=q.device)
    BD, BLOCK_N = triton.next_power_of_2(D), 32
    # split the KV range until the B*H*num_splits programs give every SM about 64:
    # short programs in many waves, so the last wave's idle SMs cost little
    num_splits = max(1, min(16, triton.cdiv(64 * _num_sms(o.device), B * H)))
    o_part = torch.empty(B, H, num_splits, BD, dtype=torch.float32, device=o.device)
    lse = torch.empty(B, H, num_splits, dtype=torch.float32, device=o.device)
    decode_attention_fwd_kernel[(B, H, num_splits)](
        q, k_cache, v_cache, seq_lens, o_part, lse, D**-0.5, N, H=H, D=D, BD=BD, BLOCK_N=BLOCK_N, NUM_SPLITS=num_splits
    )
    decode_attention_merge_kernel[(B, H)](o_part, lse, seq_lens, o, H=H, D=D, BD=BD, BLOCK_N=BLOCK_N, NUM_SPLITS=num_splits)
    return o
