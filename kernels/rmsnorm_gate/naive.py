"""Plain PyTorch reference for the gated RMSNorm, in fp32 (float64 for float64 inputs)."""
import torch
import torch.nn.functional as F

from patterns.kernels.common import at_least_fp32


def naive_rmsnorm_gate(x: torch.Tensor, g: torch.Tensor, weight: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    r"""
    Args:
        x: `[..., D]` the rows to normalise (e.g. attention output per head).
        g: `[..., D]` the gate, through SiLU.
        weight: `[D]`.
        eps: added to the mean square.

    Returns:
        y: `x / sqrt(mean(x^2) + eps) * weight * silu(g)`, in `x.dtype`.
    """
    x32, g32 = at_least_fp32(x), at_least_fp32(g)
    rstd = torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)
    return (x32 * rstd * at_least_fp32(weight) * F.silu(g32)).to(x.dtype)
