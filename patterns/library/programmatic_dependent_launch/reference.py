"""Plain PyTorch reference: RMSNorm then gated residual in float32, rounded to the input dtype between the two as the kernels do."""
import torch


def make_inputs(shape: dict, seed: int, device: str = "cpu") -> dict:
    T, D = shape["T"], shape["D"]
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(T, D, generator=g)
    w = 1.0 + 0.1 * torch.randn(D, generator=g)
    gate = torch.randn(T, D, generator=g)
    r = torch.randn(T, D, generator=g)
    return {k: v.to(device=device, dtype=torch.bfloat16) for k, v in dict(x=x, w=w, g=gate, r=r).items()}


def reference(x: torch.Tensor, w: torch.Tensor, g: torch.Tensor, r: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    xf = x.float()
    y = (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * w.float()).to(x.dtype)
    return (r.float() + y.float() * torch.sigmoid(g.float())).to(x.dtype)
