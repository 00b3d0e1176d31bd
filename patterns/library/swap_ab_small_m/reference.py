"""Plain PyTorch reference: y = x @ w^T in float64, returned as float32."""
import torch


def make_inputs(shape: dict, seed: int, device: str = "cpu") -> dict:
    M, N, K = shape["M"], shape["N"], shape["K"]
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(M, K, generator=g) / K**0.5
    w = torch.randn(N, K, generator=g)
    return {"x": x.to(device), "w": w.to(device)}


def reference(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return (x.double() @ w.double().T).float()
