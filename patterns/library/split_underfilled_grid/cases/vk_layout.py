# BLOCK_DV passed inline, the grid in a variable, state laid out [V, K] (SGLang style)
import torch
import triton
import triton.language as tl


@triton.jit
def vk_decode_kernel(q, k, v, h, o, DV, K: tl.constexpr, BLOCK_DV: tl.constexpr):
    i_nh = tl.program_id(0).to(tl.int64)
    o_k = tl.arange(0, K)
    o_dv = tl.arange(0, BLOCK_DV)
    m_dv = o_dv < DV
    b_q = tl.load(q + i_nh * K + o_k).to(tl.float32)
    b_k = tl.load(k + i_nh * K + o_k).to(tl.float32)
    p_h = h + i_nh * DV * K + o_dv[:, None] * K + o_k[None, :]
    # [BLOCK_DV, K]
    b_h = tl.load(p_h, mask=m_dv[:, None], other=0)
    b_v = tl.load(v + i_nh * DV + o_dv, mask=m_dv, other=0) - tl.sum(b_h * b_k[None, :], 1)
    b_h += b_v[:, None] * b_k[None, :]
    tl.store(p_h, b_h, mask=m_dv[:, None])
    tl.store(o + i_nh * DV + o_dv, tl.sum(b_h * b_q[None, :], 1), mask=m_dv)


def vk_decode(q, k, v, h):
    B, H, K = q.shape
    DV = v.shape[-1]
    o = torch.empty_like(v)
    grid = (B * H,)
    vk_decode_kernel[grid](q, k, v, h, o, DV, K=K, BLOCK_DV=triton.next_power_of_2(DV))
    return o
