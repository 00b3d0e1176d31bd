"""Gated delta rule decode (Qwen3-Next style): one token per sequence, fp32 state [K, V].

One program per (sequence, head) covers all of V. At decode batch 1 with 12
heads per GPU that is 12 programs on a 132-SM H200.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def gdn_decode_kernel(
    q, k, v, a, b, A_log, dt_bias, o, h, scale,
    H: tl.constexpr, K: tl.constexpr, V: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr,
):
    i_nh, i_v = tl.program_id(0).to(tl.int64) // tl.cdiv(V, BV), tl.program_id(0).to(tl.int64) % tl.cdiv(V, BV)
    i_h = i_nh % H
    o_k = tl.arange(0, BK)
    o_v = i_v * BV + tl.arange(0, BV)
    m_k, m_v = o_k < K, o_v < V
    m_h = m_k[:, None] & m_v[None, :]

    b_q = tl.load(q + i_nh * K + o_k, mask=m_k, other=0).to(tl.float32)
    b_k = tl.load(k + i_nh * K + o_k, mask=m_k, other=0).to(tl.float32)
    b_v = tl.load(v + i_nh * V + o_v, mask=m_v, other=0).to(tl.float32)
    b_q = b_q / tl.sqrt(tl.sum(b_q * b_q) + 1e-6) * scale
    b_k = b_k / tl.sqrt(tl.sum(b_k * b_k) + 1e-6)
    b_x = tl.load(a + i_nh).to(tl.float32) + tl.load(dt_bias + i_h)
    b_g = -tl.exp(tl.load(A_log + i_h)) * tl.where(b_x > 20.0, b_x, tl.log(1 + tl.exp(b_x)))
    b_beta = tl.sigmoid(tl.load(b + i_nh).to(tl.float32))

    p_h = h + i_nh * K * V + o_k[:, None] * V + o_v[None, :]
    # [BK, BV]
    b_h = tl.load(p_h, mask=m_h, other=0) * tl.exp(b_g)
    b_v = b_beta * (b_v - tl.sum(b_h * b_k[:, None], 0))
    b_h += b_k[:, None] * b_v[None, :]
    b_o = tl.sum(b_h * b_q[:, None], 0)
    tl.store(o + i_nh * V + o_v, b_o.to(o.dtype.element_ty), mask=m_v)
    tl.store(p_h, b_h, mask=m_h)


def _num_sms(device: torch.device) -> int:
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return 132  # the H200 this tiling targets; the interpreter has no SMs


def gdn_decode(q, k, v, a, b, A_log, dt_bias, h):
    B, H, K, V = *q.shape, v.shape[-1]
    o = torch.empty_like(v)
    BK, BV = triton.next_power_of_2(K), triton.next_power_of_2(V)
    # at most 64 columns a program, then halve the V tile until the B*H*NV programs
    # give every SM 4 (16 columns at least)
    BV = min(BV, 64)
    while BV > 16 and B * H * triton.cdiv(V, BV) < 4 * _num_sms(q.device):
        BV //= 2
    num_warps = 8 if BK * BV >= 128 * 128 else 4
    gdn_decode_kernel[(B * H * triton.cdiv(V, BV),)](q, k, v, a, b, A_log, dt_bias, o, h, K**-0.5, H=H, K=K, V=V, BK=BK, BV=BV, num_warps=num_warps)
    return o, h
