"""Scaled softmax over rows, y = softmax(x·scale), with its log-sum-exp.

tl.exp on fp32 lowers to a multiply by log2(e) and ex2.approx: per element the
kernel multiplies by `scale`, subtracts the max, multiplies by log2(e), exponentiates.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def softmax_fwd_kernel(x, y, lse, scale, N, BN: tl.constexpr):
    i_t = tl.program_id(0).to(tl.int64)
    o_n = tl.arange(0, BN)
    m_n = o_n < N
    # [BN]
    b_s = tl.load(x + i_t * N + o_n, mask=m_n, other=float('-inf')).to(tl.float32) * scale
    b_m = tl.max(b_s, 0)
    b_p = tl.exp(b_s - b_m)
    b_acc = tl.sum(b_p, 0)
    tl.store(y + i_t * N + o_n, b_p / b_acc, mask=m_n)
    tl.store(lse + i_t, b_m + tl.log(b_acc))


def scaled_softmax(x: torch.Tensor, scale: float) -> tuple[torch.Tensor, torch.Tensor]:
    T, N = x.shape
    y = torch.empty_like(x)
    lse = torch.empty(T, dtype=torch.float32, device=x.device)
    softmax_fwd_kernel[(T,)](x, y, lse, scale, N, BN=triton.next_power_of_2(N))
    return y, lse
