"""Gated linear recurrence (Mamba-2 style scalar decay) over a prefill, one token at a time.

One program per (sequence, head) walks all T tokens: h = exp(-exp(A_log) * softplus(dt + dt_bias)) * h + k vᵀ,
o = hᵀ q. The per-head constants A_log and dt_bias are loaded again, and exp(A_log)
recomputed, at every one of the T steps; the T steps themselves run in series.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def gated_scan_fwd_kernel(q, k, v, dt, A_log, dt_bias, o, T, H: tl.constexpr, K: tl.constexpr, V: tl.constexpr):
    i_b, i_h = tl.program_id(0).to(tl.int64), tl.program_id(1).to(tl.int64)
    o_k, o_v = tl.arange(0, K), tl.arange(0, V)
    # [K, V]
    b_h = tl.zeros([K, V], dtype=tl.float32)
    for i_t in range(0, T):
        i_bth = (i_b * T + i_t) * H + i_h
        b_a = tl.load(A_log + i_h).to(tl.float32)
        b_db = tl.load(dt_bias + i_h).to(tl.float32)
        b_dt = tl.load(dt + i_bth).to(tl.float32) + b_db
        b_dt = tl.where(b_dt > 20.0, b_dt, tl.log(1 + tl.exp(b_dt)))
        b_g = tl.exp(-tl.exp(b_a) * b_dt)
        b_q = tl.load(q + i_bth * K + o_k).to(tl.float32)
        b_k = tl.load(k + i_bth * K + o_k).to(tl.float32)
        b_v = tl.load(v + i_bth * V + o_v).to(tl.float32)
        b_h = b_h * b_g + b_k[:, None] * b_v[None, :]
        b_o = tl.sum(b_h * b_q[:, None], axis=0)
        tl.store(o + i_bth * V + o_v, b_o.to(o.dtype.element_ty))


def gated_scan(q, k, v, dt, A_log, dt_bias):
    B, T, H, K = q.shape
    V = v.shape[-1]
    o = torch.empty_like(v)
    gated_scan_fwd_kernel[(B, H)](q, k, v, dt, A_log, dt_bias, o, T, H=H, K=K, V=V)
    return o
