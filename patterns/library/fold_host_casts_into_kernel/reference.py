"""Plain PyTorch reference: sigmoid of a half-precision tensor, in float64, returned as fp32."""
import torch


def make_inputs(shape: dict, seed: int, device: str = "cpu") -> dict:
    g = torch.Generator().manual_seed(seed)
    return {"raw": torch.randn(shape["T"], shape["H"], generator=g).to(device=device, dtype=torch.float16)}


def reference(raw: torch.Tensor) -> torch.Tensor:
    return torch.sigmoid(raw.double()).float()
