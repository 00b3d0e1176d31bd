"""Plain PyTorch reference for the GEMM, in fp32 (float64 for float64 inputs)."""
import torch

from patterns.kernels.common import at_least_fp32


def naive_matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    r"""
    Args:
        a: `[M, K]`.
        b: `[K, N]`.

    Returns:
        c: `a @ b` accumulated in fp32, in `a.dtype`.
    """
    return (at_least_fp32(a) @ at_least_fp32(b)).to(a.dtype)
