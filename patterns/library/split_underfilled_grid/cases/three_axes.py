# refuse: line 16: tl.dot on values of the V tile
import torch
import triton
import triton.language as tl


@triton.jit
def chunk_state_kernel(k, v, h, NT, K: tl.constexpr, V: tl.constexpr, BT: tl.constexpr, BV: tl.constexpr):
    i_b, i_h, i_t = tl.program_id(0).to(tl.int64), tl.program_id(1).to(tl.int64), tl.program_id(2).to(tl.int64)
    o_k = tl.arange(0, K)
    o_v = tl.arange(0, BV)
    o_t = i_t * BT + tl.arange(0, BT)
    m_v = o_v < V
    b_k = tl.load(k + ((i_b * NT * BT + o_t[:, None]) * K + o_k[None, :]))
    b_v = tl.load(v + ((i_b * NT * BT + o_t[:, None]) * V + o_v[None, :]), mask=m_v[None, :], other=0)
    tl.store(h + (((i_b * tl.num_programs(1) + i_h) * NT + i_t) * K + o_k[:, None]) * V + o_v[None, :], tl.dot(tl.trans(b_k), b_v), mask=m_v[None, :])


def chunk_state(k, v, BT=16):
    B, H, T, K = k.shape
    V = v.shape[-1]
    NT = T // BT
    h = torch.empty(B, H, NT, K, V, device=k.device)
    chunk_state_kernel[(B, H, NT)](k, v, h, NT, K=K, V=V, BT=BT, BV=triton.next_power_of_2(V))
    return h
