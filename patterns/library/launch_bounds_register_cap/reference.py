"""Plain PyTorch reference: single-query attention per (batch·head) in float64."""
import torch


def make_inputs(shape: dict, seed: int, device: str = "cpu") -> dict:
    BH, T, D = shape["BH"], shape["T"], shape["D"]
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(BH, D, generator=g)
    k = torch.randn(BH, T, D, generator=g)
    v = torch.randn(BH, T, D, generator=g)
    return {n: t.to(device=device, dtype=torch.float32) for n, t in dict(q=q, k=k, v=v).items()}


def reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    scale = q.shape[-1] ** -0.5
    s = torch.einsum("bd,btd->bt", q.double(), k.double()) * scale
    p = torch.softmax(s, dim=-1)
    return torch.einsum("bt,btd->bd", p, v.double()).float()
