"""Plain PyTorch reference: the product of the fp32 operands, accumulated in float64."""
import torch


def make_inputs(shape: dict, seed: int, device: str = "cpu") -> dict:
    M, N, K = shape["M"], shape["N"], shape["K"]
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(M, K, generator=g)
    b = torch.randn(N, K, generator=g) / K**0.5
    return {k: v.to(device=device, dtype=torch.float32) for k, v in dict(a=a, b=b).items()}


def reference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return (a.double() @ b.double().T).float()
