"""Plain PyTorch reference: causal depthwise conv1d over tokens, in float64."""
import torch


def make_inputs(shape: dict, seed: int, device: str = "cpu") -> dict:
    T, D = shape["T"], shape["D"]
    g = torch.Generator().manual_seed(seed)
    return {"x": torch.randn(T, D, generator=g).to(device), "w": torch.randn(D, 4, generator=g).to(device)}


def reference(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    T, D = x.shape
    W = w.shape[1]
    xp = torch.nn.functional.pad(x.double().t()[None], (W - 1, 0))
    return torch.nn.functional.conv1d(xp, w.double()[:, None, :], groups=D)[0].t().float()
