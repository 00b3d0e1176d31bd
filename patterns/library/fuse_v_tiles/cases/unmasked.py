# refuse: the V tile o_v is never masked
import torch
import triton
import triton.language as tl


@triton.jit
def gated_delta_decode_fwd_kernel(q, k, v, g, beta, h, o, scale, HV: tl.constexpr, K: tl.constexpr, V: tl.constexpr, BV: tl.constexpr):
    i_v, i_nh = tl.program_id(0).to(tl.int64), tl.program_id(1).to(tl.int64)
    o_k = tl.arange(0, K)
    o_v = i_v * BV + tl.arange(0, BV)
    b_q = tl.load(q + i_nh * K + o_k).to(tl.float32)
    b_k = tl.load(k + i_nh * K + o_k).to(tl.float32)
    b_q = b_q / tl.sqrt(tl.sum(b_q * b_q) + 1e-6) * scale
    b_k = b_k / tl.sqrt(tl.sum(b_k * b_k) + 1e-6)
    b_g = tl.exp(tl.load(g + i_nh).to(tl.float32))
    p_h = h + i_nh * K * V + o_k[:, None] * V + o_v[None, :]
    b_h = tl.load(p_h) * b_g
    b_v = (tl.load(v + i_nh * V + o_v).to(tl.float32) - tl.sum(b_h * b_k[:, None], axis=0)) * tl.load(beta + i_nh)
    b_h += b_k[:, None] * b_v[None, :]
    tl.store(p_h, b_h)
    tl.store(o + i_nh * V + o_v, tl.sum(b_h * b_q[:, None], axis=0).to(o.dtype.element_ty))


def gated_delta_decode(q, k, v, g, beta, h):
    B, HV, K = k.shape
    V = v.shape[-1]
    o = torch.empty_like(v)
    gated_delta_decode_fwd_kernel[(triton.cdiv(V, 32), B * HV)](q, k, v, g, beta, h, o, K**-0.5, HV=HV, K=K, V=V, BV=32)
    return o
