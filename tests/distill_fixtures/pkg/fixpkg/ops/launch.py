# The launcher lives in another file than its kernels (as upstream wrappers do).
import torch
import triton

from fixpkg.ops import kernels
from fixpkg.ops.kernels import decay_kernel


def decay(x: torch.Tensor) -> torch.Tensor:
    T = x.shape[0]
    y = torch.empty_like(x)
    BT = 16
    decay_kernel[(triton.cdiv(T, BT),)](x, y, T, BT=BT)
    return y


def gather_rows(x, idx):
    y = torch.empty_like(x)
    kernels.gather_kernel[(1,)](x, idx, y, x.shape[0], BT=16)
    return y
