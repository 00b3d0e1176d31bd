"""Plain PyTorch reference: residual add then RMSNorm, in float64; returns (y, h)."""
import torch


def make_inputs(shape: dict, seed: int, device: str = "cpu") -> dict:
    T, D = shape["T"], shape["D"]
    g = torch.Generator().manual_seed(seed)
    return {
        "x": torch.randn(T, D, generator=g).to(device),
        "residual": torch.randn(T, D, generator=g).to(device),
        "w": (1 + 0.1 * torch.randn(D, generator=g)).to(device),
        "eps": 1e-6,
    }


def reference(x: torch.Tensor, residual: torch.Tensor, w: torch.Tensor, eps: float):
    h = x.double() + residual.double()
    y = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps) * w.double()
    return y.float(), h.float()
