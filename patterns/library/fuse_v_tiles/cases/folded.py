# refuse: i_v is not a program_id axis of its own \(line 11: `i_nh, i_v = pid // NV, pid % NV`\)
import torch
import triton
import triton.language as tl


@triton.jit
def recurrent_decode_kernel(q, k, v, h, o, NV, K: tl.constexpr, V: tl.constexpr, BV: tl.constexpr):
    # one flat grid: the V tile and the head share program_id(0)
    pid = tl.program_id(0).to(tl.int64)
    i_nh, i_v = pid // NV, pid % NV
    o_k = tl.arange(0, K)
    o_v = i_v * BV + tl.arange(0, BV)
    m_v = o_v < V
    b_k = tl.load(k + i_nh * K + o_k).to(tl.float32)
    b_k = b_k / tl.sqrt(tl.sum(b_k * b_k) + 1e-6)
    p_h = h + i_nh * K * V + o_k[:, None] * V + o_v[None, :]
    b_h = tl.load(p_h, mask=m_v[None, :], other=0) + b_k[:, None] * tl.load(v + i_nh * V + o_v, mask=m_v, other=0)[None, :]
    tl.store(p_h, b_h, mask=m_v[None, :])
    tl.store(o + i_nh * V + o_v, tl.sum(b_h * tl.load(q + i_nh * K + o_k)[:, None], 0), mask=m_v)


def recurrent_decode(q, k, v, h):
    B, H, K = q.shape
    V = v.shape[-1]
    o = torch.empty_like(v)
    NV = triton.cdiv(V, 32)
    recurrent_decode_kernel[(NV * B * H,)](q, k, v, h, o, NV, K=K, V=V, BV=32)
    return o
