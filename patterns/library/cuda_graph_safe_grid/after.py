"""Split-KV decode attention: one query token per sequence against its KV cache.

Stage 1 splits each sequence into SPLIT-token chunks, one program per
(sequence, head, split), and writes a partial output and log-sum-exp; stage 2
merges the partials. The split axis is sized from the KV buffer's capacity
S_MAX, a shape known on the host: programs past their sequence's length return
at once, so the launch reads nothing back and a CUDA graph captured at one
batch can be replayed whatever the sequence lengths are.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def decode_attn_split_fwd_kernel(q_ptr, k_ptr, v_ptr, lens_ptr, op_ptr, lse_ptr, scale, H, D, S_MAX, NS, SPLIT: tl.constexpr, BN: tl.constexpr, BD: tl.constexpr):
    i_b, i_h, i_s = tl.program_id(0).to(tl.int64), tl.program_id(1).to(tl.int64), tl.program_id(2).to(tl.int64)
    seq_len = tl.load(lens_ptr + i_b)
    start = i_s * SPLIT
    if start >= seq_len:
        return
    end = tl.minimum(start + SPLIT, seq_len)
    o_d = tl.arange(0, BD)
    m_d = o_d < D
    # [BD]
    b_q = tl.load(q_ptr + (i_b * H + i_h) * D + o_d, mask=m_d, other=0.0).to(tl.float32) * scale
    b_m = tl.full([1], float("-inf"), dtype=tl.float32)
    b_l = tl.zeros([1], dtype=tl.float32)
    b_o = tl.zeros([BD], dtype=tl.float32)
    for i_n in range(start, end, BN):
        o_n = i_n + tl.arange(0, BN)
        m_n = o_n < end
        p_kv = ((i_b * S_MAX + o_n[:, None]) * H + i_h) * D + o_d[None, :]
        # [BN, BD]
        b_k = tl.load(k_ptr + p_kv, mask=m_n[:, None] & m_d[None, :], other=0.0).to(tl.float32)
        b_v = tl.load(v_ptr + p_kv, mask=m_n[:, None] & m_d[None, :], other=0.0).to(tl.float32)
        # [BN]
        b_s = tl.where(m_n, tl.sum(b_q[None, :] * b_k, 1), float("-inf"))
        b_m_new = tl.maximum(b_m, tl.max(b_s, 0))
        b_p = tl.exp(b_s - b_m_new)
        b_alpha = tl.exp(b_m - b_m_new)
        b_l = b_l * b_alpha + tl.sum(b_p, 0)
        b_o = b_o * b_alpha + tl.sum(b_p[:, None] * b_v, 0)
        b_m = b_m_new
    tl.store(op_ptr + ((i_b * H + i_h) * NS + i_s) * D + o_d, b_o / b_l, mask=m_d)
    tl.store(lse_ptr + (i_b * H + i_h) * NS + i_s + tl.arange(0, 1), b_m + tl.log(b_l))


@triton.jit
def decode_attn_merge_kernel(op_ptr, lse_ptr, lens_ptr, o_ptr, H, D, NS, SPLIT: tl.constexpr, BD: tl.constexpr):
    i_b, i_h = tl.program_id(0).to(tl.int64), tl.program_id(1).to(tl.int64)
    seq_len = tl.load(lens_ptr + i_b)
    o_d = tl.arange(0, BD)
    m_d = o_d < D
    b_m = tl.full([1], float("-inf"), dtype=tl.float32)
    b_l = tl.zeros([1], dtype=tl.float32)
    b_o = tl.zeros([BD], dtype=tl.float32)
    for i_s in range(0, tl.cdiv(seq_len, SPLIT)):
        b_lse = tl.load(lse_ptr + (i_b * H + i_h) * NS + i_s + tl.arange(0, 1))
        b_op = tl.load(op_ptr + ((i_b * H + i_h) * NS + i_s) * D + o_d, mask=m_d, other=0.0)
        b_m_new = tl.maximum(b_m, b_lse)
        b_alpha = tl.exp(b_m - b_m_new)
        b_w = tl.exp(b_lse - b_m_new)
        b_l = b_l * b_alpha + b_w
        b_o = b_o * b_alpha + b_w * b_op
        b_m = b_m_new
    tl.store(o_ptr + (i_b * H + i_h) * D + o_d, (b_o / b_l).to(o_ptr.dtype.element_ty), mask=m_d)


def decode_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, seq_lens: torch.Tensor) -> torch.Tensor:
    B, H, D = q.shape
    S_MAX = k.shape[1]
    SPLIT, BN, BD = 16, 8, triton.next_power_of_2(D)
    NS = triton.cdiv(S_MAX, SPLIT)
    o_part = torch.empty(B, H, NS, D, dtype=torch.float32, device=q.device)
    lse = torch.empty(B, H, NS, dtype=torch.float32, device=q.device)
    o = torch.empty_like(q)
    decode_attn_split_fwd_kernel[(B, H, NS)](q, k, v, seq_lens, o_part, lse, D**-0.5, H, D, S_MAX, NS, SPLIT=SPLIT, BN=BN, BD=BD)
    decode_attn_merge_kernel[(B, H)](o_part, lse, seq_lens, o, H, D, NS, SPLIT=SPLIT, BD=BD)
    return o
