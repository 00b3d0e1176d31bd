"""Plain PyTorch reference: RMSNorm over the last dim with a weight, in float64."""
import torch


def make_inputs(shape: dict, seed: int, device: str = "cpu") -> dict:
    T, D = shape["T"], shape["D"]
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(T, D, generator=g)
    w = 1 + 0.1 * torch.randn(D, generator=g)
    return {"x": x.to(device), "w": w.to(device), "eps": 1e-6}


def reference(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    x = x.double()
    return (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w.double()).float()
