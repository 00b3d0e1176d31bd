"""Plain PyTorch reference: unpack the nibbles, scale per group, matmul in float64."""
import torch


def make_inputs(shape: dict, seed: int, device: str = "cpu") -> dict:
    M, N, K, G = shape["M"], shape["N"], shape["K"], shape["G"]
    g = torch.Generator().manual_seed(seed)
    q = torch.randint(0, 16, (N, K), generator=g, dtype=torch.uint8)
    w_q = q[:, 0::2] | (q[:, 1::2] << 4)
    scales = torch.rand(N, K // G, generator=g) / K**0.5
    x = torch.randn(M, K, generator=g)
    return {"x": x.to(device), "w_q": w_q.to(device), "scales": scales.to(device), "G": G}


def reference(x, w_q, scales, G):
    lo, hi = (w_q & 0xF).double(), (w_q >> 4).double()
    q = torch.stack([lo, hi], -1).flatten(1)  # [N, K]
    w = (q - 8.0) * scales.double().repeat_interleave(G, 1)
    return (x.double() @ w.T).float()
