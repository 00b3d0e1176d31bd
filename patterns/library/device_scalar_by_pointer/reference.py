"""Plain PyTorch reference: x * sigmoid(alpha) for a one-element alpha, in float64."""
import torch


def make_inputs(shape: dict, seed: int, device: str = "cpu") -> dict:
    g = torch.Generator().manual_seed(seed)
    return {"x": torch.randn(shape["N"], generator=g).to(device), "alpha": torch.randn(1, generator=g).to(device)}


def reference(x: torch.Tensor, alpha: torch.Tensor) -> torch.Tensor:
    return (x.double() * torch.sigmoid(alpha.double())).float()
