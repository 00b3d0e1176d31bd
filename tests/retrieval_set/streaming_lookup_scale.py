"""Streams a large activation once while every program re-reads the same small per-channel table."""
import torch
import triton
import triton.language as tl


@triton.jit
def channel_scale_kernel(x, table, y, N, C: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    o = pid * BLOCK + tl.arange(0, BLOCK)
    m = o < N
    b_x = tl.load(x + o, mask=m, other=0.0)
    b_s = tl.load(table + o % C, mask=m, other=0.0)
    tl.store(y + o, b_x * b_s, mask=m)


def channel_scale(x: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    N = x.numel()
    y = torch.empty_like(x)
    channel_scale_kernel[(triton.cdiv(N, 4096),)](x, table, y, N, C=table.numel(), BLOCK=4096)
    return y
