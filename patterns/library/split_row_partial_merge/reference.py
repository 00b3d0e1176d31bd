"""Plain PyTorch reference: torch.logsumexp over each row in float64."""
import torch


def make_inputs(shape: dict, seed: int, device: str = "cpu") -> dict:
    g = torch.Generator().manual_seed(seed)
    return {"x": (torch.randn(shape["M"], shape["N"], generator=g) * 4).to(device)}


def reference(x: torch.Tensor) -> torch.Tensor:
    return torch.logsumexp(x.double(), dim=-1).float()
