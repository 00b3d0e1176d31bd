# a T-token gated delta rule (Qwen3-Next/GDN verify): scalar per-head gate parameters
import torch
import triton
import triton.language as tl


@triton.jit
def gdn_verify_fwd_kernel(q, k, v, a, b, A_log, dt_bias, h, o, T, scale, HV: tl.constexpr, K: tl.constexpr, V: tl.constexpr, BV: tl.constexpr):
    i_v, i_nh = tl.program_id(0).to(tl.int64), tl.program_id(1).to(tl.int64)
    i_n, i_hv = i_nh // HV, i_nh % HV
    o_k = tl.arange(0, K)
    o_v = i_v * BV + tl.arange(0, BV)
    m_v = o_v < V
    p_h = h + i_nh * K * V + o_k[:, None] * V + o_v[None, :]
    b_h = tl.load(p_h, mask=m_v[None, :], other=0)
    for i_t in range(0, T):
        i_tok = (i_n * T + i_t) * HV + i_hv
        b_q = tl.load(q + i_tok * K + o_k).to(tl.float32) * scale
        b_k = tl.load(k + i_tok * K + o_k).to(tl.float32)
        b_v = tl.load(v + i_tok * V + o_v, mask=m_v, other=0).to(tl.float32)
        # per-head gate parameters
        b_A = tl.load(A_log + i_hv).to(tl.float32)
        b_dt = tl.load(dt_bias + i_hv).to(tl.float32)
        b_negA = -tl.exp(b_A)
        b_x = tl.load(a + i_tok).to(tl.float32) + b_dt
        b_g = b_negA * tl.where(b_x > 20.0, b_x, tl.log(1 + tl.exp(b_x)))
        b_beta = tl.sigmoid(tl.load(b + i_tok).to(tl.float32))
        b_h *= tl.exp(b_g)
        b_v = b_beta * (b_v - tl.sum(b_h * b_k[:, None], 0))
        b_h += b_k[:, None] * b_v[None, :]
        tl.store(o + i_tok * V + o_v, tl.sum(b_h * b_q[:, None], 0).to(o.dtype.element_ty), mask=m_v)
    tl.store(p_h, b_h, mask=m_v[None, :])


def gdn_verify(q, k, v, a, b, A_log, dt_bias, h):
    B, T, HV, K = q.shape
    V = v.shape[-1]
    o = torch.empty_like(v)
    gdn_verify_fwd_kernel[(triton.cdiv(V, 32), B * HV)](q, k, v, a, b, A_log, dt_bias, h, o, T, K**-0.5, HV=HV, K=K, V=V, BV=32)
    return o
