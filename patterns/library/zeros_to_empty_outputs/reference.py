"""Plain PyTorch reference: SwiGLU, silu(gate) * up, in float64."""
import torch


def make_inputs(shape: dict, seed: int, device: str = "cpu") -> dict:
    T, D = shape["T"], shape["D"]
    gen = torch.Generator().manual_seed(seed)
    return {"g": torch.randn(T, D, generator=gen).to(device), "u": torch.randn(T, D, generator=gen).to(device)}


def reference(g: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    g = g.double()
    return (torch.nn.functional.silu(g) * u.double()).float()
