"""Plain PyTorch reference: W @ x in float64."""
import torch


def make_inputs(shape: dict, seed: int, device: str = "cpu") -> dict:
    g = torch.Generator().manual_seed(seed)
    return {"w": torch.randn(shape["N"], shape["K"], generator=g).to(device), "x": torch.randn(shape["K"], generator=g).to(device)}


def reference(w: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    return (w.double() @ x.double()).float()
