"""Plain PyTorch reference: the merge chain in float64, returned as float32."""
import torch


def make_inputs(shape: dict, seed: int, device: str = "cpu") -> dict:
    N, K, V = shape["N"], shape["K"], shape["V"]
    g = torch.Generator().manual_seed(seed)
    # contraction-like transitions (spectral radius < 1) as in decayed linear attention
    m = torch.randn(N, K, K, generator=g) / (2 * K**0.5) + 0.5 * torch.eye(K)
    h_local = torch.randn(N, K, V, generator=g)
    h0 = torch.randn(K, V, generator=g)
    return {k: v.to(device=device, dtype=torch.float32) for k, v in dict(m=m, h_local=h_local, h0=h0).items()}


def reference(m: torch.Tensor, h_local: torch.Tensor, h0: torch.Tensor) -> torch.Tensor:
    h = h0.double()
    for i in range(m.shape[0]):
        h = m[i].double() @ h + h_local[i].double()
    return h.float()
