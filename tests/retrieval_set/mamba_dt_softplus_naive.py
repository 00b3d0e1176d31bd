"""Mamba-style step size: dt = softplus(dt_raw + dt_bias), written as log(1 + exp(x))."""
import torch
import triton
import triton.language as tl


@triton.jit
def dt_softplus_kernel(dt, dt_bias, out, H, BH: tl.constexpr):
    i_t = tl.program_id(0).to(tl.int64)
    o_h = tl.arange(0, BH)
    m_h = o_h < H
    x = tl.load(dt + i_t * H + o_h, mask=m_h, other=0.0).to(tl.float32)
    x = x + tl.load(dt_bias + o_h, mask=m_h, other=0.0).to(tl.float32)
    tl.store(out + i_t * H + o_h, tl.log(1.0 + tl.exp(x)), mask=m_h)


def dt_softplus(dt: torch.Tensor, dt_bias: torch.Tensor) -> torch.Tensor:
    T, H = dt.shape
    out = torch.empty(T, H, device=dt.device, dtype=torch.float32)
    dt_softplus_kernel[(T,)](dt, dt_bias, out, H, BH=triton.next_power_of_2(H), num_warps=1)
    return out
