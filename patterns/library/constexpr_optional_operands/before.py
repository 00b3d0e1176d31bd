"""RMSNorm with an optional bias: y = x / rms(x) * w (+ b).

Without a bias the launcher makes a zero vector for it, so every call
allocates and fills a buffer and every program loads and adds D zeros.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def rms_norm_fwd_kernel(x, w, b, y, eps, D, BD: tl.constexpr):
    i_t = tl.program_id(0).to(tl.int64)
    o_d = tl.arange(0, BD)
    m_d = o_d < D
    b_x = tl.load(x + i_t * D + o_d, mask=m_d, other=0.0).to(tl.float32)
    b_rstd = 1 / tl.sqrt(tl.sum(b_x * b_x, 0) / D + eps)
    b_y = b_x * b_rstd * tl.load(w + o_d, mask=m_d, other=0.0).to(tl.float32)
    b_y += tl.load(b + o_d, mask=m_d, other=0.0).to(tl.float32)
    tl.store(y + i_t * D + o_d, b_y, mask=m_d)


def rms_norm(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None, eps: float) -> torch.Tensor:
    T, D = x.shape
    y = torch.empty_like(x)
    bias = b if b is not None else torch.zeros(D, device=x.device, dtype=x.dtype)
    rms_norm_fwd_kernel[(T,)](x, w, bias, y, eps, D, BD=triton.next_power_of_2(D))
    return y
