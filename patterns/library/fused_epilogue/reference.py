"""Plain PyTorch reference: out = r + silu(x @ wᵀ + b), in float64."""
import torch


def make_inputs(shape: dict, seed: int, device: str = "cpu") -> dict:
    M, N, K = shape["M"], shape["N"], shape["K"]
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(M, K, generator=g)
    w = torch.randn(N, K, generator=g) / K**0.5
    b = torch.randn(N, generator=g)
    r = torch.randn(M, N, generator=g)
    return {n: t.to(device=device, dtype=torch.float32) for n, t in dict(x=x, w=w, b=b, r=r).items()}


def reference(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
    h = x.double() @ w.double().T + b.double()
    return (r.double() + torch.nn.functional.silu(h)).float()
