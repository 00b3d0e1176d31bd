# refuse: V = 512 needs BV = 512 > max_block 256
import torch
import triton
import triton.language as tl

HEAD_V = 512  # Mamba2-style wide value heads


@triton.jit
def wide_decode_kernel(q, k, v, h, o, K: tl.constexpr, V: tl.constexpr, BV: tl.constexpr):
    i_v, i_nh = tl.program_id(0).to(tl.int64), tl.program_id(1).to(tl.int64)
    o_k = tl.arange(0, K)
    o_v = i_v * BV + tl.arange(0, BV)
    m_v = o_v < V
    b_k = tl.load(k + i_nh * K + o_k).to(tl.float32)
    b_k = b_k / tl.sqrt(tl.sum(b_k * b_k) + 1e-6)
    p_h = h + i_nh * K * V + o_k[:, None] * V + o_v[None, :]
    b_h = tl.load(p_h, mask=m_v[None, :], other=0) + b_k[:, None] * tl.load(v + i_nh * V + o_v, mask=m_v, other=0)[None, :]
    tl.store(p_h, b_h, mask=m_v[None, :])
    tl.store(o + i_nh * V + o_v, tl.sum(b_h * tl.load(q + i_nh * K + o_k)[:, None], 0), mask=m_v)


def wide_decode(q, k, v, h):
    B, H, K = q.shape
    o = torch.empty_like(v)
    wide_decode_kernel[(triton.cdiv(HEAD_V, 64), B * H)](q, k, v, h, o, K=K, V=HEAD_V, BV=64)
    return o
