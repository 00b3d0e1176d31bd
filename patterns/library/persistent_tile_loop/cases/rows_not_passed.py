# refuse: the grid's tile count `M` uses M, which rmsnorm_fwd_kernel does not receive
# tests/retrieval_set/rmsnorm_two_pass.py: the row count M is the grid, never passed to the kernel
import torch
import triton
import triton.language as tl


@triton.jit
def rmsnorm_fwd_kernel(x, w, y, N, eps, BLOCK: tl.constexpr):
    i_row = tl.program_id(0).to(tl.int64)
    b_sq = tl.zeros([BLOCK], dtype=tl.float32)
    for i_n in range(0, N, BLOCK):
        o_n = i_n + tl.arange(0, BLOCK)
        b_x = tl.load(x + i_row * N + o_n, mask=o_n < N, other=0.0).to(tl.float32)
        b_sq += b_x * b_x
    rstd = 1.0 / tl.sqrt(tl.sum(b_sq, axis=0) / N + eps)
    for i_n in range(0, N, BLOCK):
        o_n = i_n + tl.arange(0, BLOCK)
        b_x = tl.load(x + i_row * N + o_n, mask=o_n < N, other=0.0).to(tl.float32)
        b_w = tl.load(w + o_n, mask=o_n < N, other=0.0).to(tl.float32)
        tl.store(y + i_row * N + o_n, (b_x * rstd * b_w).to(y.dtype.element_ty), mask=o_n < N)


def rmsnorm(x, w, eps=1e-6):
    M, N = x.shape
    y = torch.empty_like(x)
    rmsnorm_fwd_kernel[(M,)](x, w, y, N, eps, BLOCK=1024)
    return y
