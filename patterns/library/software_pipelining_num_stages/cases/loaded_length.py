# refuse: the trip count of the loop on line 16 \(`range\(0, seq_len, BT\)`\) is read from memory \(seq_len\)
# paged decode attention: the KV length of each sequence is loaded by the program
import torch
import triton
import triton.language as tl


@triton.jit
def paged_decode_kernel(q, k_cache, v_cache, seq_lens, o, scale, H: tl.constexpr, D: tl.constexpr, BT: tl.constexpr):
    i_b, i_h = tl.program_id(0), tl.program_id(1)
    seq_len = tl.load(seq_lens + i_b)
    o_d = tl.arange(0, D)
    b_q = tl.load(q + (i_b * H + i_h) * D + o_d).to(tl.float32)
    b_m, b_l = float("-inf"), 0.0
    b_acc = tl.zeros([D], dtype=tl.float32)
    for i_t in range(0, seq_len, BT):
        o_t = i_t + tl.arange(0, BT)
        m_t = o_t < seq_len
        b_k = tl.load(k_cache + ((i_b * 4096 + o_t[:, None]) * H + i_h) * D + o_d[None, :], mask=m_t[:, None], other=0.0)
        b_s = tl.where(m_t, tl.sum(b_k * b_q[None, :], 1) * scale, float("-inf"))
        b_m_new = tl.maximum(b_m, tl.max(b_s, 0))
        b_p = tl.exp(b_s - b_m_new)
        b_alpha = tl.exp(b_m - b_m_new)
        b_v = tl.load(v_cache + ((i_b * 4096 + o_t[:, None]) * H + i_h) * D + o_d[None, :], mask=m_t[:, None], other=0.0)
        b_acc = b_acc * b_alpha + tl.sum(b_p[:, None] * b_v, 0)
        b_l = b_l * b_alpha + tl.sum(b_p, 0)
        b_m = b_m_new
    tl.store(o + (i_b * H + i_h) * D + o_d, b_acc / b_l)


def paged_decode(q, k_cache, v_cache, seq_lens):
    B, H, D = q.shape
    o = torch.empty_like(q)
    paged_decode_kernel[(B, H)](q, k_cache, v_cache, seq_lens, o, D**-0.5, H=H, D=D, BT=64)
    return o
