# refuse: BV is chosen by @triton.autotune
import torch
import triton
import triton.language as tl


@triton.autotune(configs=[triton.Config({"BV": bv}) for bv in (32, 64, 128)], key=["V"])
@triton.jit
def tuned_decode_kernel(q, k, v, h, o, K: tl.constexpr, V: tl.constexpr, BV: tl.constexpr):
    i_nh = tl.program_id(0).to(tl.int64)
    o_k = tl.arange(0, K)
    o_v = tl.arange(0, BV)
    m_v = o_v < V
    b_k = tl.load(k + i_nh * K + o_k).to(tl.float32)
    p_h = h + i_nh * K * V + o_k[:, None] * V + o_v[None, :]
    b_h = tl.load(p_h, mask=m_v[None, :], other=0) + b_k[:, None] * tl.load(v + i_nh * V + o_v, mask=m_v, other=0)[None, :]
    tl.store(p_h, b_h, mask=m_v[None, :])
    tl.store(o + i_nh * V + o_v, tl.sum(b_h * tl.load(q + i_nh * K + o_k)[:, None], 0), mask=m_v)


def tuned_decode(q, k, v, h):
    B, H, K = q.shape
    o = torch.empty_like(v)
    tuned_decode_kernel[(B * H,)](q, k, v, h, o, K=K, V=v.shape[-1])
    return o
