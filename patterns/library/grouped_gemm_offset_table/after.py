"""Grouped GEMM for MoE experts: out[rows of g] = x[rows of g] @ w[g]ᵀ for G groups.

x is [total_M, K] with the rows of group g at offsets[g]:offsets[g + 1] (tokens
sorted by expert), w is [G, N, K]. One launch covers every group: a tile offset
table (the prefix sum of each group's row-tile count, built on the device) maps
program i_m to its group g and its tile inside the group; the group's row
bounds come from offsets[g], offsets[g + 1] and its weight from w[g].
"""
import torch
import triton
import triton.language as tl


@triton.jit
def grouped_gemm_nt_kernel(a, b, c, offsets, tile_offsets, G, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    i_m, i_n = tl.program_id(0), tl.program_id(1)
    if i_m >= tl.load(tile_offsets + G):
        return
    # the group of this row tile: how many groups end at or before it
    g = 0
    for i_g in range(0, G):
        g += (tl.load(tile_offsets + i_g + 1) <= i_m).to(tl.int32)
    bos, eos = tl.load(offsets + g).to(tl.int64), tl.load(offsets + g + 1).to(tl.int64)
    o_m = bos + (i_m - tl.load(tile_offsets + g)) * BM + tl.arange(0, BM)
    o_n = i_n * BN + tl.arange(0, BN)
    m_m, m_n = o_m < eos, o_n < N
    # [BM, BN]
    b_c = tl.zeros([BM, BN], dtype=tl.float32)
    for i_k in range(0, K, BK):
        o_k = i_k + tl.arange(0, BK)
        m_k = o_k < K
        b_a = tl.load(a + o_m[:, None] * K + o_k[None, :], mask=m_m[:, None] & m_k[None, :], other=0.0)
        b_b = tl.load(b + g * N * K + o_n[None, :] * K + o_k[:, None], mask=m_k[:, None] & m_n[None, :], other=0.0)
        b_c += tl.dot(b_a, b_b)
    tl.store(c + o_m[:, None] * N + o_n[None, :], b_c, mask=m_m[:, None] & m_n[None, :])


def grouped_gemm(x: torch.Tensor, w: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    G, N, K = w.shape
    out = torch.empty(x.shape[0], N, dtype=torch.float32, device=x.device)
    BM, BN, BK = 16, 16, 32
    # on the device: row tiles per group, prefix-summed; the grid is their upper bound
    tiles = (offsets.diff() + BM - 1) // BM
    tile_offsets = torch.nn.functional.pad(tiles.cumsum(0), (1, 0)).to(torch.int32)
    grid = (triton.cdiv(x.shape[0], BM) + G, triton.cdiv(N, BN))
    grouped_gemm_nt_kernel[grid](x, w, out, offsets, tile_offsets, G, N, K, BM=BM, BN=BN, BK=BK)
    return out
