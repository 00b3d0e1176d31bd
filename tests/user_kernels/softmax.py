"""A user's row softmax (written for the tests, not one of kernels/): three passes over the row in BD chunks."""
import torch
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(x, y, D, BD: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    p_x = x + row * D
    p_y = y + row * D
    b_m = tl.full([BD], float("-inf"), dtype=tl.float32)
    for i in range(0, D, BD):
        o = i + tl.arange(0, BD)
        b_m = tl.maximum(b_m, tl.load(p_x + o, mask=o < D, other=float("-inf")).to(tl.float32))
    m = tl.max(b_m, 0)
    b_s = tl.zeros([BD], dtype=tl.float32)
    for i in range(0, D, BD):
        o = i + tl.arange(0, BD)
        b_x = tl.load(p_x + o, mask=o < D, other=float("-inf")).to(tl.float32)
        b_s += tl.exp(b_x - m)
    s = tl.sum(b_s, 0)
    for i in range(0, D, BD):
        o = i + tl.arange(0, BD)
        b_x = tl.load(p_x + o, mask=o < D, other=float("-inf")).to(tl.float32)
        tl.store(p_y + o, (tl.exp(b_x - m) / s).to(p_y.dtype.element_ty), mask=o < D)


def softmax(x: torch.Tensor) -> torch.Tensor:
    """Softmax over the last dim of a contiguous 2-D tensor."""
    N, D = x.shape
    y = torch.empty_like(x)
    softmax_kernel[(N,)](x, y, D, BD=256, num_warps=4)
    return y
