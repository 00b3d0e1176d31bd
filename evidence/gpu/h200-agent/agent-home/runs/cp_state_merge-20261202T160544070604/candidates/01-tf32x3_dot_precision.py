"""Context-parallel state merge, baseline: the chain h <- M_i @ h + h_local_i with fp32 tl.dot.

The dot runs at Triton's default input precision, TF32 on NVIDIA GPUs from
Ampere on. One program per (V tile, head) walks the N chunks in order and
writes the state after each merge.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def cp_state_merge_fwd_kernel(
    m,
    h_local,
    h0,
    h,
    N,
    H: tl.constexpr,
    K: tl.constexpr,
    V: tl.constexpr,
    BK: tl.constexpr,
    BV: tl.constexpr,
):
    i_v, i_h = tl.program_id(0).to(tl.int64), tl.program_id(1).to(tl.int64)
    o_k = tl.arange(0, BK)
    o_v = i_v * BV + tl.arange(0, BV)
    m_k, m_v = o_k < K, o_v < V
    m_m = m_k[:, None] & m_k[None, :]
    m_h = m_k[:, None] & m_v[None, :]

    p_m = m + i_h * K * K + o_k[:, None] * K + o_k[None, :]
    p_hl = h_local + i_h * K * V + o_k[:, None] * V + o_v[None, :]
    p_h = h + i_h * K * V + o_k[:, None] * V + o_v[None, :]
    # [BK, BV]
    b_h = tl.load(h0 + i_h * K * V + o_k[:, None] * V + o_v[None, :], mask=m_h, other=0.).to(tl.float32)
    for _ in range(0, N):
        # [BK, BK]
        b_m = tl.load(p_m, mask=m_m, other=0.).to(tl.float32)
        b_hl = tl.load(p_hl, mask=m_h, other=0.).to(tl.float32)
        b_h = tl.dot(b_m, b_h, input_precision="tf32x3") + b_hl
        tl.store(p_h, b_h, mask=m_h)
        p_m += H * K * K
        p_hl += H * K * V
        p_h += H * K * V


def cp_state_merge(m: torch.Tensor, h_local: torch.Tensor, h0: torch.Tensor) -> torch.Tensor:
    """Merge N chunk summaries into h0. Returns h [N, H, K, V] fp32, the state after each chunk."""
    N, H, K, V = h_local.shape
    assert m.shape == (N, H, K, K) and h0.shape == (H, K, V)
    assert all(x.is_contiguous() for x in (m, h_local, h0))
    h = torch.empty(N, H, K, V, dtype=torch.float32, device=h_local.device)
    BK = max(16, triton.next_power_of_2(K))
    BV = 32
    grid = (triton.cdiv(V, BV), H)
    # tf32x3 holds a high and a low part of both operands: twice the warps once a tile reaches 128
    num_warps = 8 if max(BK, BV) >= 128 else 4
    # two stages keep the pipelined [BK, BK] fp32 loads within shared memory at K = 128 (160 KiB)
    cp_state_merge_fwd_kernel[grid](m, h_local, h0, h, N, H=H, K=K, V=V, BK=BK, BV=BV, num_warps=num_warps, num_stages=2)
    return h
