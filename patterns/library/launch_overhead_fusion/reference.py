"""Plain PyTorch reference: index the pool's page axis, every layer at once."""
import torch


def make_inputs(shape: dict, seed: int, device: str = "cpu") -> dict:
    L, P, PAGE, D, N = shape["L"], shape["P"], shape["PAGE"], shape["D"], shape["N"]
    g = torch.Generator().manual_seed(seed)
    kv_cache = torch.randn(L, P, PAGE, D, generator=g).to(torch.bfloat16)
    page_ids = torch.randperm(P, generator=g)[:N].to(torch.int32)
    return {"kv_cache": kv_cache.to(device), "page_ids": page_ids.to(device)}


def reference(kv_cache: torch.Tensor, page_ids: torch.Tensor) -> torch.Tensor:
    return kv_cache[:, page_ids.long()].clone()
