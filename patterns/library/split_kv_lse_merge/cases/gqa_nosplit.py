# run: decode_attention q=float32[2, 4, 16] k=float32[2, 70, 2, 16] v=float32[2, 70, 2, 16]
# tests/retrieval_set/decode_attention_nosplit.py: GQA heads, the cache length T from the host
"""Single-query decode attention: one program per (batch, head) walks the whole KV cache."""
import torch
import triton
import triton.language as tl


@triton.jit
def decode_attn_fwd_kernel(q, k, v, o, scale, T, H: tl.constexpr, HKV: tl.constexpr, D: tl.constexpr, BT: tl.constexpr):
    i_b, i_h = tl.program_id(0).to(tl.int64), tl.program_id(1).to(tl.int64)
    i_hkv = i_h // (H // HKV)
    o_d = tl.arange(0, D)
    b_q = tl.load(q + (i_b * H + i_h) * D + o_d).to(tl.float32)
    b_m = float("-inf")
    b_l = 0.0
    b_acc = tl.zeros([D], dtype=tl.float32)
    for i_t in range(0, T, BT):
        o_t = i_t + tl.arange(0, BT)
        m_t = o_t < T
        p_k = k + ((i_b * T + o_t[:, None]) * HKV + i_hkv) * D + o_d[None, :]
        b_k = tl.load(p_k, mask=m_t[:, None], other=0.0).to(tl.float32)
        b_s = tl.sum(b_k * b_q[None, :], axis=1) * scale
        b_s = tl.where(m_t, b_s, float("-inf"))
        b_m_new = tl.maximum(b_m, tl.max(b_s, axis=0))
        b_p = tl.exp(b_s - b_m_new)
        b_alpha = tl.exp(b_m - b_m_new)
        p_v = v + ((i_b * T + o_t[:, None]) * HKV + i_hkv) * D + o_d[None, :]
        b_v = tl.load(p_v, mask=m_t[:, None], other=0.0).to(tl.float32)
        b_acc = b_acc * b_alpha + tl.sum(b_p[:, None] * b_v, axis=0)
        b_l = b_l * b_alpha + tl.sum(b_p, axis=0)
        b_m = b_m_new
    tl.store(o + (i_b * H + i_h) * D + o_d, b_acc / b_l)


def decode_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    B, H, D = q.shape
    T, HKV = k.shape[1], k.shape[2]
    o = torch.empty_like(q)
    decode_attn_fwd_kernel[(B, H)](q, k, v, o, D**-0.5, T, H=H, HKV=HKV, D=D, BT=64)
    return o
