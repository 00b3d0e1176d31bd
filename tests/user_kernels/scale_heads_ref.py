"""The plain PyTorch reference of tests/user_kernels/scale_heads.py: a new tensor, x left as it was."""
import torch


def scale_heads(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    return (x.float() * weight.float()).to(x.dtype)
