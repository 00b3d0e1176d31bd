"""Plain PyTorch reference: RMSNorm with weight and an optional bias, in float64."""
import torch


def make_inputs(shape: dict, seed: int, device: str = "cpu") -> dict:
    T, D = shape["T"], shape["D"]
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(T, D, generator=g)
    w = 1 + 0.1 * torch.randn(D, generator=g)
    b = 0.1 * torch.randn(D, generator=g) if shape["HAS_BIAS"] else None
    return {"x": x.to(device), "w": w.to(device), "b": None if b is None else b.to(device), "eps": 1e-6}


def reference(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None, eps: float) -> torch.Tensor:
    x = x.double()
    y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w.double()
    return (y if b is None else y + b.double()).float()
