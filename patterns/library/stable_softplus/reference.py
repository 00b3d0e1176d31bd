"""Plain PyTorch reference: g = -exp(A_log) * softplus(x + dt_bias), in float64."""
import torch


def make_inputs(shape: dict, seed: int, device: str = "cpu") -> dict:
    T, H, D = shape["T"], shape["H"], shape["D"]
    gen = torch.Generator().manual_seed(seed)
    return {
        "x": (4 * torch.randn(T, H, D, generator=gen)).to(device),
        "a_log": torch.randn(H, generator=gen).to(device),
        "dt_bias": torch.randn(H * D, generator=gen).to(device),
    }


def reference(x: torch.Tensor, a_log: torch.Tensor, dt_bias: torch.Tensor) -> torch.Tensor:
    T, H, D = x.shape
    z = x.double() + dt_bias.double().view(H, D)
    return (-a_log.double().exp().view(1, H, 1) * torch.nn.functional.softplus(z)).float()
