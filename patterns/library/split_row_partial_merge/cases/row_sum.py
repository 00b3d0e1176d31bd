# refuse: row_sum_kernel carries no running max and sum of exponentials across its loop
# a row sum: no running max to merge
import torch
import triton
import triton.language as tl


@triton.jit
def row_sum_kernel(x, y, N, BN: tl.constexpr):
    i_m = tl.program_id(0)
    b_s = tl.zeros([], dtype=tl.float32)
    for i_n in range(0, N, BN):
        o_n = i_n + tl.arange(0, BN)
        b_s += tl.sum(tl.load(x + i_m * N + o_n, mask=o_n < N, other=0.0), 0)
    tl.store(y + i_m, b_s)


def row_sum(x):
    M, N = x.shape
    y = torch.empty(M, device=x.device)
    row_sum_kernel[(M,)](x, y, N, BN=256)
    return y
