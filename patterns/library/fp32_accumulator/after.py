"""Sum over the tokens of a [T, D] half-precision activation: y[d] = sum_t x[t, d].

Each program walks the tokens of BD columns in BT-row tiles, adds each tile
into a [BT, BD] running sum and reduces it once after the loop; the running
sum is kept in the accumulator's dtype.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def token_sum_kernel(x, y, T, D, BT: tl.constexpr, BD: tl.constexpr):
    o_d = tl.program_id(0) * BD + tl.arange(0, BD)
    m_d = o_d < D
    b_acc = tl.zeros([BT, BD], dtype=tl.float32)
    for i_t in range(0, T, BT):
        o_t = i_t + tl.arange(0, BT)
        b_x = tl.load(x + o_t[:, None] * D + o_d[None, :], mask=(o_t < T)[:, None] & m_d[None, :], other=0.0)
        b_acc += b_x
    tl.store(y + o_d, tl.sum(b_acc, 0), mask=m_d)


def token_sum(x: torch.Tensor) -> torch.Tensor:
    T, D = x.shape
    y = torch.empty(D, device=x.device, dtype=x.dtype)
    token_sum_kernel[(triton.cdiv(D, 32),)](x, y, T, D, BT=8, BD=32)
    return y
