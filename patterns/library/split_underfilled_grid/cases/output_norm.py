# refuse: line 19: tl.sum over the V tile: V columns are not independent
import torch
import triton
import triton.language as tl


@triton.jit
def gdn_decode_norm_kernel(q, k, v, h, w, o, eps, K: tl.constexpr, V: tl.constexpr, BV: tl.constexpr):
    i_nh = tl.program_id(0).to(tl.int64)
    o_k = tl.arange(0, K)
    o_v = tl.arange(0, BV)
    m_v = o_v < V
    b_k = tl.load(k + i_nh * K + o_k).to(tl.float32)
    p_h = h + i_nh * K * V + o_k[:, None] * V + o_v[None, :]
    b_h = tl.load(p_h, mask=m_v[None, :], other=0) + b_k[:, None] * tl.load(v + i_nh * V + o_v, mask=m_v, other=0)[None, :]
    tl.store(p_h, b_h, mask=m_v[None, :])
    b_o = tl.sum(b_h * tl.load(q + i_nh * K + o_k)[:, None], 0)
    # gated RMSNorm of the output over V: needs every V column in this program
    b_o = b_o * tl.rsqrt(tl.sum(b_o * b_o) / V + eps) * tl.load(w + o_v, mask=m_v, other=0)
    tl.store(o + i_nh * V + o_v, b_o, mask=m_v)


def gdn_decode_norm(q, k, v, h, w, eps=1e-6):
    B, H, K = q.shape
    V = v.shape[-1]
    o = torch.empty_like(v)
    gdn_decode_norm_kernel[(B * H,)](q, k, v, h, w, o, eps, K=K, V=V, BV=triton.next_power_of_2(V))
    return o
