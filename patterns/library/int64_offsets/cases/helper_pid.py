# refuse: a @triton.jit helper of row_copy_kernel reads tl.program_id: cast it there
# the kernel's own row offset is int32, and a helper reads the program id too
import torch
import triton
import triton.language as tl


@triton.jit
def _row_id():
    return tl.program_id(0)


@triton.jit
def row_copy_kernel(x, y, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    o = tl.arange(0, BLOCK)
    b_x = tl.load(x + row * N + o, mask=o < N, other=0.0)
    tl.store(y + _row_id() * N + o, b_x, mask=o < N)


def row_copy(x: torch.Tensor) -> torch.Tensor:
    M, N = x.shape
    y = torch.empty_like(x)
    row_copy_kernel[(M,)](x, y, N, BLOCK=triton.next_power_of_2(N))
    return y
