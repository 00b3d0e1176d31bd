"""Plain PyTorch reference for the GEMM, in fp32."""
import torch


def naive_matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    r"""
    Args:
        a: `[M, K]`.
        b: `[K, N]`.

    Returns:
        c: `a @ b` accumulated in fp32, in `a.dtype`.
    """
    return (a.float() @ b.float()).to(a.dtype)
