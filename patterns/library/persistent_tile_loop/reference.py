"""Plain PyTorch reference: c = a @ b in float64, returned as float32."""
import torch


def make_inputs(shape: dict, seed: int, device: str = "cpu") -> dict:
    M, N, K = shape["M"], shape["N"], shape["K"]
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(M, K, generator=g) / K**0.5
    b = torch.randn(K, N, generator=g)
    return {"a": a.to(device), "b": b.to(device)}


def reference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return (a.double() @ b.double()).float()
