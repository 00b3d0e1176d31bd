"""L2-normalise the query heads of a fused QKV projection: q / ||q|| per head.

q is a slice of the [T, (H + 2·HKV)·D] projection output, so its rows are
qkv.stride(0) apart. The kernel assumes rows D·H apart, so the launcher first
copies q into a contiguous buffer with .contiguous().
"""
import torch
import triton
import triton.language as tl


@triton.jit
def l2norm_fwd_kernel(x, y, eps, H, D, BD: tl.constexpr):
    i_t, i_h = tl.program_id(0).to(tl.int64), tl.program_id(1)
    o_d = tl.arange(0, BD)
    m_d = o_d < D
    b_x = tl.load(x + (i_t * H + i_h) * D + o_d, mask=m_d, other=0.0).to(tl.float32)
    b_y = b_x / tl.sqrt(tl.sum(b_x * b_x, 0) + eps)
    tl.store(y + (i_t * H + i_h) * D + o_d, b_y, mask=m_d)


def l2norm(q: torch.Tensor, H: int, eps: float) -> torch.Tensor:
    T = q.shape[0]
    D = q.shape[1] // H
    q = q.contiguous()
    y = torch.empty_like(q)
    l2norm_fwd_kernel[(T, H)](q, y, eps, H, D, BD=triton.next_power_of_2(D))
    return y
