"""Plain PyTorch reference: per-head L2 normalisation of a query slice, in float64."""
import torch


def make_inputs(shape: dict, seed: int, device: str = "cpu") -> dict:
    T, H, HKV, D = shape["T"], shape["H"], shape["HKV"], shape["D"]
    g = torch.Generator().manual_seed(seed)
    qkv = torch.randn(T, (H + 2 * HKV) * D, generator=g).to(device)
    # the query part of a fused projection: a strided view, not a copy
    return {"q": qkv[:, : H * D], "H": H, "eps": 1e-6}


def reference(q: torch.Tensor, H: int, eps: float) -> torch.Tensor:
    T = q.shape[0]
    x = q.double().reshape(T, H, -1)
    return (x / torch.sqrt((x * x).sum(-1, keepdim=True) + eps)).reshape(T, -1).float()
