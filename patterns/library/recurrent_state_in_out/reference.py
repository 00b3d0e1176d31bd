"""Plain PyTorch reference: the gated recurrence step by step in float64, from a zero state."""
import torch


def make_inputs(shape: dict, seed: int, device: str = "cpu") -> dict:
    BH, T, K, V = shape["BH"], shape["T"], shape["K"], shape["V"]
    gen = torch.Generator().manual_seed(seed)
    q, k = torch.randn(BH, T, K, generator=gen), torch.randn(BH, T, K, generator=gen) / K**0.5
    v = torch.randn(BH, T, V, generator=gen)
    g = -torch.rand(BH, T, K, generator=gen)  # log decay in (-1, 0]
    return {n: x.to(device) for n, x in dict(q=q, k=k, v=v, g=g).items()}


def reference(q, k, v, g):
    BH, T, K = q.shape
    h = torch.zeros(BH, K, v.shape[-1], dtype=torch.float64)
    out = []
    for t in range(T):
        h = h * g[:, t].double().exp()[:, :, None] + k[:, t].double()[:, :, None] * v[:, t].double()[:, None, :]
        out.append((h * q[:, t].double()[:, :, None]).sum(1))
    return torch.stack(out, 1).float()
