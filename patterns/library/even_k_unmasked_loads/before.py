"""Matrix-vector product y = W x for a decode step (W: [N, K], one token).

Each program takes BN rows of W and walks K in BK-wide tiles. Whether each
tile's loads check `k < K` for the tail, even when K is a multiple of BK and
no tile has one, decides whether they can be full-width vector loads.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def gemv_kernel(w, x, y, N, K, BN: tl.constexpr, BK: tl.constexpr):
    o_n = tl.program_id(0) * BN + tl.arange(0, BN)
    m_n = o_n < N
    b_acc = tl.zeros([BN], dtype=tl.float32)
    for i_k in range(0, K, BK):
        o_k = i_k + tl.arange(0, BK)
        b_w = tl.load(w + o_n[:, None] * K + o_k[None, :], mask=m_n[:, None] & (o_k < K)[None, :], other=0.0)
        b_x = tl.load(x + o_k, mask=o_k < K, other=0.0)
        b_acc += tl.sum(b_w.to(tl.float32) * b_x.to(tl.float32)[None, :], 1)
    tl.store(y + o_n, b_acc, mask=m_n)


def gemv(w: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    N, K = w.shape
    y = torch.empty(N, device=w.device, dtype=torch.float32)
    gemv_kernel[(triton.cdiv(N, 16),)](w, x, y, N, K, BN=16, BK=16)
    return y
