"""Plain PyTorch reference: column sums of an fp16 matrix, accumulated in float64."""
import torch


def make_inputs(shape: dict, seed: int, device: str = "cpu") -> dict:
    g = torch.Generator().manual_seed(seed)
    # offset data: every partial sum grows with t, as activations with a nonzero mean do
    x = 4.0 + torch.randn(shape["T"], shape["D"], generator=g)
    return {"x": x.to(device=device, dtype=torch.float16)}


def reference(x: torch.Tensor) -> torch.Tensor:
    return x.double().sum(0).to(torch.float16)
