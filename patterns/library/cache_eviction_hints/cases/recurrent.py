# per-token pointers advanced once a step: q is read by every V tile of a head (evict_last), v by one program
# (evict_first); the state is read, updated and written back in place (left unhinted)
import torch
import triton
import triton.language as tl


@triton.jit
def decay_recurrent_kernel(q, v, h, o, T, K: tl.constexpr, V: tl.constexpr, BV: tl.constexpr):
    i_bh, i_v = tl.program_id(0).to(tl.int64), tl.program_id(1).to(tl.int64)
    o_k = tl.arange(0, K)
    o_v = i_v * BV + tl.arange(0, BV)
    m_v = o_v < V
    p_q = q + i_bh * T * K + o_k
    p_v = v + i_bh * T * V + o_v
    p_o = o + i_bh * T * V + o_v
    p_h = h + i_bh * K * V + o_k[:, None] * V + o_v[None, :]
    # [K, BV]
    b_h = tl.load(p_h, mask=m_v[None, :], other=0.0)
    for _ in range(0, T):
        b_q = tl.load(p_q)
        b_v = tl.load(p_v, mask=m_v, other=0.0)
        b_h = b_h * 0.9 + b_q[:, None] * b_v[None, :]
        tl.store(p_o, tl.sum(b_h * b_q[:, None], 0), mask=m_v)
        p_q += K
        p_v += V
        p_o += V
    tl.store(p_h, b_h, mask=m_v[None, :])


def decay_recurrent_(q, v, h):
    BH, T, K = q.shape
    V = v.shape[-1]
    o = torch.empty_like(v)
    decay_recurrent_kernel[(BH, triton.cdiv(V, 32))](q, v, h, o, T, K=K, V=V, BV=32)
    return o
