"""Plain PyTorch reference: sum of squared differences, in float64, as a one-element tensor."""
import torch


def make_inputs(shape: dict, seed: int, device: str = "cpu") -> dict:
    g = torch.Generator().manual_seed(seed)
    return {"x": torch.randn(shape["N"], generator=g).to(device), "y": torch.randn(shape["N"], generator=g).to(device)}


def reference(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return ((x.double() - y.double()) ** 2).sum().reshape(1).float()
