"""Plain PyTorch reference: the input itself; quantize-dequantize must stay within e4m3's rounding of it."""
import torch


def make_inputs(shape: dict, seed: int, device: str = "cpu") -> dict:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape["M"], shape["N"], generator=g)
    return {"x": x.to(device), "G": shape["G"]}


def reference(x: torch.Tensor, G: int) -> torch.Tensor:
    return x.clone()
