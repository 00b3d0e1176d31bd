# refuse: out \(torch.zeros\) is loaded or updated atomically by colsum_kernel: it needs its zeros
import torch
import triton
import triton.language as tl


@triton.jit
def colsum_kernel(x, out, N, BLOCK: tl.constexpr):
    o = tl.arange(0, BLOCK)
    b_x = tl.load(x + tl.program_id(0) * N + o, mask=o < N, other=0.0)
    tl.atomic_add(out + o, b_x, mask=o < N)


def colsum(x):
    out = torch.zeros(x.shape[1], device=x.device, dtype=torch.float32)
    colsum_kernel[(x.shape[0],)](x, out, x.shape[1], BLOCK=triton.next_power_of_2(x.shape[1]))
    return out
