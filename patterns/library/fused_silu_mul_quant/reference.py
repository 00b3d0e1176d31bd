"""Plain PyTorch reference: silu(gate)·up in float64 (quantization must stay within half a step of it)."""
import torch


def make_inputs(shape: dict, seed: int, device: str = "cpu") -> dict:
    g = torch.Generator().manual_seed(seed)
    gu = torch.randn(shape["M"], 2 * shape["I"], generator=g)
    return {"gu": gu.to(device), "G": shape["G"]}


def reference(gu: torch.Tensor, G: int) -> torch.Tensor:
    gate, up = gu.double().chunk(2, dim=-1)
    return (torch.nn.functional.silu(gate) * up).float()
