"""Plain PyTorch reference: scaled softmax over the last dim and its log-sum-exp, in float64."""
import torch


def make_inputs(shape: dict, seed: int, device: str = "cpu") -> dict:
    T, N = shape["T"], shape["N"]
    g = torch.Generator().manual_seed(seed)
    x = 4 * torch.randn(T, N, generator=g)
    return {"x": x.to(device=device, dtype=torch.float32), "scale": N ** -0.5}


def reference(x: torch.Tensor, scale: float) -> tuple[torch.Tensor, torch.Tensor]:
    s = x.double() * scale
    return torch.softmax(s, dim=-1).float(), torch.logsumexp(s, dim=-1).float()
