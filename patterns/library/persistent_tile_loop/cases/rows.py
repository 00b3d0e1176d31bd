# run: row_scale x=float32[5, 33] s=float32[5]
# a row-wise kernel whose row count is passed: each program walks rows pid, pid + NUM_SMS, ...
import torch
import triton
import triton.language as tl


@triton.jit
def row_scale_kernel(x, s, y, M, N, BLOCK: tl.constexpr):
    i_row = tl.program_id(0).to(tl.int64)
    o_n = tl.arange(0, BLOCK)
    m_n = o_n < N
    b_x = tl.load(x + i_row * N + o_n, mask=m_n, other=0.0).to(tl.float32)
    b_s = tl.load(s + i_row).to(tl.float32)
    tl.store(y + i_row * N + o_n, (b_x * b_s).to(y.dtype.element_ty), mask=m_n)


def row_scale(x, s):
    M, N = x.shape
    y = torch.empty_like(x)
    row_scale_kernel[(M,)](x, s, y, M, N, BLOCK=triton.next_power_of_2(N))
    return y
