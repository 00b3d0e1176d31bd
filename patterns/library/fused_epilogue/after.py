"""Linear layer with bias, SiLU and a residual add: out = r + silu(x @ wᵀ + b).

The bias, the activation and the residual are applied to the fp32 accumulator in
registers before the one store: h never goes to memory.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def linear_fwd_kernel(x, w, b, r, out, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    i_m, i_n = tl.program_id(0).to(tl.int64), tl.program_id(1).to(tl.int64)
    o_m = i_m * BM + tl.arange(0, BM)
    o_n = i_n * BN + tl.arange(0, BN)
    m_m, m_n = o_m < M, o_n < N
    # [BM, BN]
    b_h = tl.zeros([BM, BN], dtype=tl.float32)
    for i_k in range(0, K, BK):
        o_k = i_k + tl.arange(0, BK)
        m_k = o_k < K
        # [BM, BK]
        b_x = tl.load(x + o_m[:, None] * K + o_k[None, :], mask=m_m[:, None] & m_k[None, :], other=0.0)
        # [BK, BN]
        b_w = tl.load(w + o_n[None, :] * K + o_k[:, None], mask=m_k[:, None] & m_n[None, :], other=0.0)
        b_h += tl.dot(b_x, b_w, input_precision="ieee")
    # epilogue on the accumulator: bias, SiLU, residual
    m_mn = m_m[:, None] & m_n[None, :]
    o_mn = o_m[:, None] * N + o_n[None, :]
    b_h += tl.load(b + o_n, mask=m_n, other=0.0)[None, :]
    b_o = tl.load(r + o_mn, mask=m_mn, other=0.0) + b_h * tl.sigmoid(b_h)
    tl.store(out + o_mn, b_o, mask=m_mn)


def linear_silu_residual(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
    M, K = x.shape
    N = w.shape[0]
    out = torch.empty_like(r)
    BM, BN = 16, 32
    grid = (triton.cdiv(M, BM), triton.cdiv(N, BN))
    linear_fwd_kernel[grid](x, w, b, r, out, M, N, K, BM=BM, BN=BN, BK=32)
    return out
