# refuse: no tile load of silu_mul_kernel is shared between programs \(each depends on program_id 0, 1\): there is nothing for evict_last to protect
# each program streams its own rows: nothing is shared between programs
import torch
import triton
import triton.language as tl


@triton.jit
def silu_mul_kernel(g, u, y, N, BLOCK: tl.constexpr):
    i_row, i_n = tl.program_id(0).to(tl.int64), tl.program_id(1)
    o_n = i_n * BLOCK + tl.arange(0, BLOCK)
    m_n = o_n < N
    b_g = tl.load(g + i_row * N + o_n, mask=m_n, other=0.0).to(tl.float32)
    b_u = tl.load(u + i_row * N + o_n, mask=m_n, other=0.0).to(tl.float32)
    tl.store(y + i_row * N + o_n, (b_g * tl.sigmoid(b_g) * b_u).to(y.dtype.element_ty), mask=m_n)


def silu_mul(g, u):
    M, N = g.shape
    y = torch.empty_like(g)
    silu_mul_kernel[(M, triton.cdiv(N, 1024))](g, u, y, N, BLOCK=1024)
    return y
