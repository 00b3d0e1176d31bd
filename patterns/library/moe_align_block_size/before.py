"""MoE expert GEMM: out[t·k + j] = x[t] @ w[topk_ids[t, j]]ᵀ for every token t and routing slot j.

One program per (token, slot) and N tile looks up its expert and multiplies
one row of x by that expert's [BN, K] weight slice with elementwise products
and a sum: every token re-reads its expert's weights, and no tensor core is
used.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def moe_gemv_fwd_kernel(x, w, out, topk_ids, N, K, top_k, BN: tl.constexpr, BK: tl.constexpr):
    i_p, i_n = tl.program_id(0).to(tl.int64), tl.program_id(1)
    e = tl.load(topk_ids + i_p).to(tl.int64)
    o_n = i_n * BN + tl.arange(0, BN)
    m_n = o_n < N
    b_o = tl.zeros([BN], dtype=tl.float32)
    for i_k in range(0, K, BK):
        o_k = i_k + tl.arange(0, BK)
        m_k = o_k < K
        b_x = tl.load(x + (i_p // top_k) * K + o_k, mask=m_k, other=0.0)
        b_w = tl.load(w + e * N * K + o_n[:, None] * K + o_k[None, :], mask=m_n[:, None] & m_k[None, :], other=0.0)
        b_o += tl.sum(b_w * b_x[None, :], 1)
    tl.store(out + i_p * N + o_n, b_o, mask=m_n)


def moe_gemm(x: torch.Tensor, w: torch.Tensor, topk_ids: torch.Tensor) -> torch.Tensor:
    M, top_k = topk_ids.shape
    E, N, K = w.shape
    out = torch.empty(M * top_k, N, dtype=torch.float32, device=x.device)
    moe_gemv_fwd_kernel[(M * top_k, triton.cdiv(N, 16))](x, w, out, topk_ids, N, K, top_k, BN=16, BK=32)
    return out
