"""Decay gate of a gated linear-attention layer (Mamba2 / KDA style):
g = -exp(A_log) * softplus(x + dt_bias), with softplus(z) = log(1 + exp(z)).

Written as it reads, softplus overflows: exp(z) is inf in fp32 for z > 88.7
and log(inf) = inf instead of z, unless large z take a linear branch.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def gate_fwd_kernel(x, a_log, dt_bias, g, H, D, BD: tl.constexpr):
    i_t, i_h = tl.program_id(0), tl.program_id(1)
    o_d = tl.arange(0, BD)
    m_d = o_d < D
    b_x = tl.load(x + (i_t * H + i_h) * D + o_d, mask=m_d, other=0.0).to(tl.float32)
    b_x += tl.load(dt_bias + i_h * D + o_d, mask=m_d, other=0.0).to(tl.float32)
    b_a = tl.load(a_log + i_h).to(tl.float32)
    b_sp = tl.where(b_x < 20.0, tl.log(1 + tl.exp(b_x)), b_x)
    tl.store(g + (i_t * H + i_h) * D + o_d, -tl.exp(b_a) * b_sp, mask=m_d)


def gate_fwd(x: torch.Tensor, a_log: torch.Tensor, dt_bias: torch.Tensor) -> torch.Tensor:
    T, H, D = x.shape
    g = torch.empty(T, H, D, device=x.device, dtype=torch.float32)
    gate_fwd_kernel[(T, H)](x, a_log, dt_bias, g, H, D, BD=triton.next_power_of_2(D))
    return g
