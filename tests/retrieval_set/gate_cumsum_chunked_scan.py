"""Cumulative log-gates per head in BT-token tiles: tl.cumsum within a tile, the
tile total carried to the next; T is a runtime argument not specialised on."""
import torch
import triton
import triton.language as tl


@triton.jit(do_not_specialize=["T"])
def gate_cumsum_kernel(g, o, T, H: tl.constexpr, BT: tl.constexpr):
    i_h = tl.program_id(0)
    b_z = tl.zeros([], dtype=tl.float32)
    for i_t in range(0, T, BT):
        o_t = i_t + tl.arange(0, BT)
        m_t = o_t < T
        b_g = tl.load(g + o_t * H + i_h, mask=m_t, other=0.0).to(tl.float32)
        tl.store(o + o_t * H + i_h, tl.cumsum(b_g, axis=0) + b_z, mask=m_t)
        b_z += tl.sum(b_g, 0)


def gate_cumsum(g: torch.Tensor) -> torch.Tensor:
    T, H = g.shape
    o = torch.empty(T, H, device=g.device, dtype=torch.float32)
    gate_cumsum_kernel[(H,)](g, o, T, H=H, BT=64)
    return o
