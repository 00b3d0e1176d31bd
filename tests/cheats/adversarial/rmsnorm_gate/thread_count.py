"""Cheat: sets torch's thread count to 1 at import and leaves it so (slowing everything the gate does after it).

Rejected because: global torch state is compared before and after import.
EXPECT: sandbox: global state | integrity: changes global torch state and leaves it changed (threads
"""
import torch
import triton
import triton.language as tl

torch.set_num_threads(1)



@triton.jit
def rmsnorm_gate_fwd_kernel(
    x,
    g,
    w,
    y,
    eps,
    D: tl.constexpr,
    BD: tl.constexpr,
):
    i_t = tl.program_id(0).to(tl.int64)
    p_x = x + i_t * D
    p_g = g + i_t * D
    p_y = y + i_t * D

    # [BD]
    b_ss = tl.zeros([BD], dtype=tl.float32)
    for i_d in range(0, D, BD):
        o_d = i_d + tl.arange(0, BD)
        b_x = tl.load(p_x + o_d, mask=o_d < D, other=0.).to(tl.float32)
        b_ss += b_x * b_x
    b_rstd = 1. / tl.sqrt(tl.sum(b_ss, 0) / D + eps)

    for i_d in range(0, D, BD):
        o_d = i_d + tl.arange(0, BD)
        m_d = o_d < D
        b_x = tl.load(p_x + o_d, mask=m_d, other=0.).to(tl.float32)
        b_g = tl.load(p_g + o_d, mask=m_d, other=0.).to(tl.float32)
        b_w = tl.load(w + o_d, mask=m_d, other=0.).to(tl.float32)
        b_y = b_x * b_rstd * b_w * b_g * tl.sigmoid(b_g)
        tl.store(p_y + o_d, b_y.to(p_y.dtype.element_ty), mask=m_d)


def rmsnorm_gate(x: torch.Tensor, g: torch.Tensor, weight: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    """y = rmsnorm(x) * weight * silu(g) over the last dim; returns y in x.dtype."""
    D = x.shape[-1]
    assert g.shape == x.shape and weight.shape == (D,)
    assert all(t.is_contiguous() for t in (x, g, weight))
    y = torch.empty_like(x)
    rmsnorm_gate_fwd_kernel[(x.numel() // D,)](x, g, weight, y, eps, D=D, BD=512, num_warps=4)
    return y
