"""A user's RMSNorm (written for the tests, not one of kernels/): one program per row, two passes in BD chunks."""
import torch
import triton
import triton.language as tl


@triton.jit
def rmsnorm_kernel(x, w, y, eps, D, BD: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    b_ss = tl.zeros([BD], dtype=tl.float32)
    for i in range(0, D, BD):
        o = i + tl.arange(0, BD)
        b_x = tl.load(x + row * D + o, mask=o < D, other=0.).to(tl.float32)
        b_ss += b_x * b_x
    rstd = 1. / tl.sqrt(tl.sum(b_ss, 0) / D + eps)
    for i in range(0, D, BD):
        o = i + tl.arange(0, BD)
        b_x = tl.load(x + row * D + o, mask=o < D, other=0.).to(tl.float32)
        b_w = tl.load(w + o, mask=o < D, other=0.).to(tl.float32)
        tl.store(y + row * D + o, (b_x * rstd * b_w).to(y.dtype.element_ty), mask=o < D)


def rmsnorm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    N, D = x.shape
    out = torch.empty_like(x)
    rmsnorm_kernel[(N,)](x, weight, out, eps, D, BD=512, num_warps=4)
    return out
