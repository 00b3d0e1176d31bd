"""Plain PyTorch reference: LayerNorm over the last dim (weight and bias), in float64."""
import torch


def make_inputs(shape: dict, seed: int, device: str = "cpu") -> dict:
    T, D = shape["T"], shape["D"]
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(T, D, generator=g) + 0.5
    w = 1 + 0.1 * torch.randn(D, generator=g)
    b = 0.1 * torch.randn(D, generator=g)
    out = {n: t.to(device=device, dtype=torch.float32) for n, t in dict(x=x, w=w, b=b).items()}
    out["eps"] = 1e-5
    return out


def reference(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, eps: float) -> torch.Tensor:
    x = x.double()
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    return ((x - mean) / torch.sqrt(var + eps) * w.double() + b.double()).float()
