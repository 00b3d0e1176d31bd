"""Cumulative sum of log-gates over time, per head: y[t, h] = sum_{s <= t} g[s, h].

One program per head walks the T tokens one at a time, adding each gate to a
running total and storing it: T dependent load-add-store steps of one scalar.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def gate_cumsum_kernel(g, y, T, H):
    i_h = tl.program_id(0)
    b_z = tl.zeros([], dtype=tl.float32)
    for i_t in range(T):
        b_z += tl.load(g + i_t * H + i_h).to(tl.float32)
        tl.store(y + i_t * H + i_h, b_z)


def gate_cumsum(g: torch.Tensor) -> torch.Tensor:
    T, H = g.shape
    y = torch.empty(T, H, device=g.device, dtype=torch.float32)
    gate_cumsum_kernel[(H,)](g, y, T, H)
    return y
