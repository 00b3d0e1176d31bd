"""Cumulative sum of log-gates over time, per head: y[t, h] = sum_{s <= t} g[s, h].

One program per head walks the tokens in BT-token tiles: tl.cumsum scans each
tile in parallel (log2(BT) steps), and the tile's total carries into the next.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def gate_cumsum_kernel(g, y, T, H, BT: tl.constexpr):
    i_h = tl.program_id(0)
    b_z = tl.zeros([], dtype=tl.float32)
    for i_t in range(0, T, BT):
        o_t = i_t + tl.arange(0, BT)
        m_t = o_t < T
        b_g = tl.load(g + o_t * H + i_h, mask=m_t, other=0.0).to(tl.float32)
        tl.store(y + o_t * H + i_h, tl.cumsum(b_g, axis=0) + b_z, mask=m_t)
        b_z += tl.sum(b_g, 0)


def gate_cumsum(g: torch.Tensor) -> torch.Tensor:
    T, H = g.shape
    y = torch.empty(T, H, device=g.device, dtype=torch.float32)
    gate_cumsum_kernel[(H,)](g, y, T, H, BT=16)
    return y
