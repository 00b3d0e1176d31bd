"""Plain PyTorch reference: causal attention per (batch·head) in float64."""
import torch


def make_inputs(shape: dict, seed: int, device: str = "cpu") -> dict:
    BH, T, D = shape["BH"], shape["T"], shape["D"]
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(BH, T, D, generator=g) for _ in range(3))
    return {n: t.to(device=device, dtype=torch.float32) for n, t in dict(q=q, k=k, v=v).items()}


def reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    T, D = q.shape[1], q.shape[2]
    s = q.double() @ k.double().transpose(1, 2) * D ** -0.5
    s = s.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
    return (torch.softmax(s, -1) @ v.double()).float()
