"""Plain PyTorch reference: each (token, slot) row times its expert's weight, in float64."""
import torch


def make_inputs(shape: dict, seed: int, device: str = "cpu") -> dict:
    M, E, N, K, top_k = shape["M"], shape["E"], shape["N"], shape["K"], shape["TOPK"]
    g = torch.Generator().manual_seed(seed)
    topk_ids = torch.stack([torch.randperm(E, generator=g)[:top_k] for _ in range(M)]).to(torch.int32)
    t = dict(x=torch.randn(M, K, generator=g), w=torch.randn(E, N, K, generator=g) / K**0.5, topk_ids=topk_ids)
    return {n: v.to(device) for n, v in t.items()}


def reference(x, w, topk_ids):
    rows = x.double().repeat_interleave(topk_ids.shape[1], 0)
    ws = w.double()[topk_ids.flatten().long()]  # [M·k, N, K]
    return torch.einsum("pk,pnk->pn", rows, ws).float()
