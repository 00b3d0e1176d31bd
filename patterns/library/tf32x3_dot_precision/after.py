"""Context-parallel state merge: h <- M_i @ h + h_i over a chain of chunks.

The fp32 `tl.dot` runs at Triton's default input precision, which is TF32 on
NVIDIA GPUs from Ampere on: each product keeps 10 mantissa bits.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def state_merge_kernel(m_ptr, hl_ptr, h0_ptr, out_ptr, N, K, V, BK: tl.constexpr, BV: tl.constexpr):
    i_v = tl.program_id(0).to(tl.int64)
    o_k = tl.arange(0, BK)
    o_v = i_v * BV + tl.arange(0, BV)
    m_k, m_v = o_k < K, o_v < V
    m_kv = m_k[:, None] & m_v[None, :]
    # [BK, BV]
    b_h = tl.load(h0_ptr + o_k[:, None] * V + o_v[None, :], mask=m_kv, other=0.0).to(tl.float32)
    for i_n in range(N):
        # [BK, BK]
        b_m = tl.load(m_ptr + i_n * K * K + o_k[:, None] * K + o_k[None, :], mask=m_k[:, None] & m_k[None, :], other=0.0)
        b_hl = tl.load(hl_ptr + i_n * K * V + o_k[:, None] * V + o_v[None, :], mask=m_kv, other=0.0)
        b_h = tl.dot(b_m.to(tl.float32), b_h, input_precision="tf32x3") + b_hl
    tl.store(out_ptr + o_k[:, None] * V + o_v[None, :], b_h, mask=m_kv)


def state_merge(m: torch.Tensor, h_local: torch.Tensor, h0: torch.Tensor) -> torch.Tensor:
    N, K, V = h_local.shape
    out = torch.empty_like(h0)
    BK = max(16, triton.next_power_of_2(K))
    BV = 32
    # tf32x3 holds a high and a low part of both operands: twice the warps once a tile reaches 128
    num_warps = 8 if max(BK, BV) >= 128 else 4
    state_merge_kernel[(triton.cdiv(V, BV),)](m, h_local, h0, out, N, K, V, BK=BK, BV=BV, num_warps=num_warps)
    return out
