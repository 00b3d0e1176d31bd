"""Plain PyTorch reference: per chunk n, o[:, nBT:(n+1)BT] = scale * q[:, nBT:(n+1)BT] @ h[:, n]."""
import torch


def make_inputs(shape: dict, seed: int, device: str = "cpu") -> dict:
    B, T, H, K, V, BT = shape["B"], shape["T"], shape["H"], shape["K"], shape["V"], shape["BT"]
    NT = (T + BT - 1) // BT
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(B, T, H, K, generator=g)
    h = torch.randn(B, NT, H, K, V, generator=g)
    return {"q": q.to(device), "h": h.to(device), "chunk_size": BT}


def reference(q: torch.Tensor, h: torch.Tensor, chunk_size: int) -> torch.Tensor:
    B, T, H, K = q.shape
    NT, BT = h.shape[1], chunk_size
    o = torch.empty(B, T, H, h.shape[-1], dtype=torch.float64)
    for n in range(NT):
        s = slice(n * BT, min((n + 1) * BT, T))
        o[:, s] = torch.einsum("bthk,bhkv->bthv", q[:, s].double(), h[:, n].double())
    return (o * K**-0.5).float()
