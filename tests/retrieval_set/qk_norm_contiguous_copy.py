"""Per-head RMSNorm of the key heads of a fused QKV projection, after copying
the key slice into a dense buffer."""
import torch
import triton
import triton.language as tl


@triton.jit
def head_rmsnorm_kernel(x, w, y, eps, D, BD: tl.constexpr):
    i_r = tl.program_id(0).to(tl.int64)
    o_d = tl.arange(0, BD)
    m_d = o_d < D
    b_x = tl.load(x + i_r * D + o_d, mask=m_d, other=0.0).to(tl.float32)
    b_y = b_x / tl.sqrt(tl.sum(b_x * b_x, 0) / D + eps) * tl.load(w + o_d, mask=m_d, other=0.0).to(tl.float32)
    tl.store(y + i_r * D + o_d, b_y, mask=m_d)


def k_norm(qkv: torch.Tensor, w: torch.Tensor, H: int, HKV: int, eps: float = 1e-6) -> torch.Tensor:
    T = qkv.shape[0]
    D = w.numel()
    k = qkv[:, H * D:(H + HKV) * D].contiguous()
    y = torch.empty_like(k)
    head_rmsnorm_kernel[(T * HKV,)](k, w, y, eps, D, BD=triton.next_power_of_2(D), num_warps=1)
    return y
