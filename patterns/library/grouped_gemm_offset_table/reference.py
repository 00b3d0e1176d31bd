"""Plain PyTorch reference: one matmul per group in float64."""
import torch


def make_inputs(shape: dict, seed: int, device: str = "cpu") -> dict:
    G, M, N, K = shape["G"], shape["M"], shape["N"], shape["K"]
    g = torch.Generator().manual_seed(seed)
    sizes = torch.randint(0, 2 * M + 1, (G,), generator=g)  # empty groups included
    offsets = torch.nn.functional.pad(sizes.cumsum(0), (1, 0)).to(torch.int32)
    x = torch.randn(int(sizes.sum()), K, generator=g)
    w = torch.randn(G, N, K, generator=g) / K**0.5
    return {"x": x.to(device), "w": w.to(device), "offsets": offsets.to(device)}


def reference(x: torch.Tensor, w: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    o = offsets.tolist()
    out = torch.zeros(x.shape[0], w.shape[1], dtype=torch.float64)
    for g in range(w.shape[0]):
        out[o[g]:o[g + 1]] = x[o[g]:o[g + 1]].double() @ w[g].double().T
    return out.float()
