"""Plain PyTorch reference: y = x * s[:, None], computed in float32."""
import torch


def make_inputs(shape: dict, seed: int, device: str = "cpu") -> dict:
    M, N = shape["M"], shape["N"]
    g = torch.Generator().manual_seed(seed)
    return {"x": torch.randn(M, N, generator=g).to(device), "s": torch.randn(M, generator=g).to(device)}


def reference(x: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    return (x.float() * s.float()[:, None]).to(x.dtype)
