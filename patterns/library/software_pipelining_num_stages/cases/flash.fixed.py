# run: attention q=float32[2, 70, 16] k=float32[2, 70, 16] v=float32[2, 70, 16]
# tests/retrieval_set/flash_attention_fwd.py: the KV loop of a prefill attention
import torch
import triton
import triton.language as tl


@triton.jit
def attn_fwd_kernel(q, k, v, o, qk_scale, T, D: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr):
    i_m, i_bh = tl.program_id(0), tl.program_id(1).to(tl.int64)
    o_m = i_m * BM + tl.arange(0, BM)
    o_d = tl.arange(0, D)
    b_q = tl.load(q + (i_bh * T + o_m[:, None]) * D + o_d[None, :], mask=o_m[:, None] < T, other=0.0)
    b_q = (b_q * (qk_scale * 1.44269504)).to(tl.float32)
    b_m = tl.full([BM], float("-inf"), dtype=tl.float32)
    b_l = tl.zeros([BM], dtype=tl.float32)
    b_acc = tl.zeros([BM, D], dtype=tl.float32)
    for i_n in tl.range(0, T, BN, num_stages=3):
        o_n = i_n + tl.arange(0, BN)
        b_k = tl.load(k + (i_bh * T + o_n[:, None]) * D + o_d[None, :], mask=o_n[:, None] < T, other=0.0).to(tl.float32)
        b_s = tl.dot(b_q, tl.trans(b_k))
        b_s = tl.where(o_n[None, :] < T, b_s, float("-inf"))
        b_m_new = tl.maximum(b_m, tl.max(b_s, axis=1))
        b_p = tl.exp2(b_s - b_m_new[:, None])
        b_alpha = tl.exp2(b_m - b_m_new)
        b_v = tl.load(v + (i_bh * T + o_n[:, None]) * D + o_d[None, :], mask=o_n[:, None] < T, other=0.0).to(tl.float32)
        b_acc = b_acc * b_alpha[:, None] + tl.dot(b_p, b_v)
        b_l = b_l * b_alpha + tl.sum(b_p, axis=1)
        b_m = b_m_new
    tl.store(o + (i_bh * T + o_m[:, None]) * D + o_d[None, :], b_acc / b_l[:, None], mask=o_m[:, None] < T)


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    BH, T, D = q.shape
    o = torch.empty_like(q)
    attn_fwd_kernel[(triton.cdiv(T, 64), BH)](q, k, v, o, D**-0.5, T, D=D, BM=64, BN=64)
    return o
