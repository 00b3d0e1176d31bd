"""Plain PyTorch reference: cumulative sum over the time axis, in float64."""
import torch


def make_inputs(shape: dict, seed: int, device: str = "cpu") -> dict:
    g = torch.Generator().manual_seed(seed)
    # log-gates: negative, as log(sigmoid) decays are
    return {"g": torch.nn.functional.logsigmoid(torch.randn(shape["T"], shape["H"], generator=g)).to(device)}


def reference(g: torch.Tensor) -> torch.Tensor:
    return g.double().cumsum(0).float()
