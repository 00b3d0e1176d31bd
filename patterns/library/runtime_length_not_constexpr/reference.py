"""Plain PyTorch reference: mean over the token axis, in float64."""
import torch


def make_inputs(shape: dict, seed: int, device: str = "cpu") -> dict:
    g = torch.Generator().manual_seed(seed)
    return {"x": torch.randn(shape["B"], shape["T"], shape["D"], generator=g).to(device)}


def reference(x: torch.Tensor) -> torch.Tensor:
    return x.double().mean(1).float()
