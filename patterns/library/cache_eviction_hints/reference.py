"""Plain PyTorch reference: y = x @ wᵀ for a few decode tokens, in float64."""
import torch


def make_inputs(shape: dict, seed: int, device: str = "cpu") -> dict:
    B, N, K = shape["B"], shape["N"], shape["K"]
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(B, K, generator=g)
    w = torch.randn(N, K, generator=g) / K**0.5
    return {"x": x.to(device=device, dtype=torch.float32), "w": w.to(device=device, dtype=torch.float32)}


def reference(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return (x.double() @ w.double().T).float()
