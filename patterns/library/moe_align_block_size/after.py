"""MoE expert GEMM: out[t·k + j] = x[t] @ w[topk_ids[t, j]]ᵀ for every token t and routing slot j.

The (token, slot) pairs are sorted by expert and each expert's list is padded
to a multiple of BM (moe_align_block_size): sorted_token_ids holds the pair
indices with a sentinel in the padding, expert_ids one expert per block of BM.
Each program then runs a [BM, BN] tile of a real GEMM with tl.dot: BM rows of
one expert, gathered from x through sorted_token_ids, against that expert's
weight tile, read once per block instead of once per token.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def fused_moe_fwd_kernel(x, w, out, sorted_token_ids, expert_ids, num_tokens_post_padded, N, K, num_valid, top_k,
                         BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    i_m, i_n = tl.program_id(0), tl.program_id(1)
    if i_m * BM >= tl.load(num_tokens_post_padded):
        return
    # [BM] pair indices of this block (padding holds num_valid) and the block's expert
    o_p = tl.load(sorted_token_ids + i_m * BM + tl.arange(0, BM)).to(tl.int64)
    m_p = o_p < num_valid
    e = tl.load(expert_ids + i_m).to(tl.int64)
    o_n = i_n * BN + tl.arange(0, BN)
    m_n = o_n < N
    b_c = tl.zeros([BM, BN], dtype=tl.float32)
    for i_k in range(0, K, BK):
        o_k = i_k + tl.arange(0, BK)
        m_k = o_k < K
        b_x = tl.load(x + (o_p // top_k)[:, None] * K + o_k[None, :], mask=m_p[:, None] & m_k[None, :], other=0.0)
        b_w = tl.load(w + e * N * K + o_n[None, :] * K + o_k[:, None], mask=m_k[:, None] & m_n[None, :], other=0.0)
        b_c += tl.dot(b_x, b_w)
    tl.store(out + o_p[:, None] * N + o_n[None, :], b_c, mask=m_p[:, None] & m_n[None, :])


def moe_align_block_size(topk_ids: torch.Tensor, E: int, BM: int):
    """On the device: pair indices sorted by expert, each expert padded to BM; one expert per block."""
    flat = topk_ids.flatten().long()
    n = flat.numel()
    counts = torch.bincount(flat, minlength=E)
    padded = (counts + BM - 1) // BM * BM
    starts = torch.cumsum(padded, 0) - padded
    order = torch.argsort(flat, stable=True)
    rank = torch.arange(n, device=flat.device) - (torch.cumsum(counts, 0) - counts)[flat[order]]
    max_blocks = triton.cdiv(n + E * (BM - 1), BM)  # a bound from the shapes: no host sync
    sorted_ids = torch.full((max_blocks * BM,), n, dtype=torch.int32, device=flat.device)
    sorted_ids[starts[flat[order]] + rank] = order.to(torch.int32)
    block_ends = torch.cumsum(padded // BM, 0)
    expert_ids = torch.searchsorted(block_ends, torch.arange(max_blocks, device=flat.device), right=True).clamp(max=E - 1)
    return sorted_ids, expert_ids.to(torch.int32), padded.sum().reshape(1).to(torch.int32), max_blocks


def moe_gemm(x: torch.Tensor, w: torch.Tensor, topk_ids: torch.Tensor) -> torch.Tensor:
    M, top_k = topk_ids.shape
    E, N, K = w.shape
    BM = 16
    sorted_ids, expert_ids, num_post, max_blocks = moe_align_block_size(topk_ids, E, BM)
    out = torch.empty(M * top_k, N, dtype=torch.float32, device=x.device)
    fused_moe_fwd_kernel[(max_blocks, triton.cdiv(N, 16))](x, w, out, sorted_ids, expert_ids, num_post, N, K, M * top_k, top_k,
                                                           BM=BM, BN=16, BK=32)
    return out
