# refuse: the store on line 18 has a mask that is not one bound per axis
# causal attention scores: the store mask compares rows with columns, not one bound per axis
import torch
import triton
import triton.language as tl


@triton.jit
def causal_scores_kernel(q, k, s, T, D: tl.constexpr, BT: tl.constexpr):
    i_t, i_s = tl.program_id(0), tl.program_id(1)
    o_t = i_t * BT + tl.arange(0, BT)
    o_s = i_s * BT + tl.arange(0, BT)
    o_d = tl.arange(0, D)
    m_t, m_s = o_t < T, o_s < T
    b_q = tl.load(q + o_t[:, None] * D + o_d[None, :], mask=m_t[:, None], other=0.0)
    b_k = tl.load(k + o_s[:, None] * D + o_d[None, :], mask=m_s[:, None], other=0.0)
    b_s = tl.dot(b_q, tl.trans(b_k))
    tl.store(s + o_t[:, None] * T + o_s[None, :], b_s, mask=(o_t[:, None] >= o_s[None, :]) & m_t[:, None] & m_s[None, :])


def causal_scores(q, k):
    T, D = q.shape
    s = torch.zeros(T, T, device=q.device, dtype=torch.float32)
    causal_scores_kernel[(triton.cdiv(T, 32), triton.cdiv(T, 32))](q, k, s, T, D=D, BT=32)
    return s
