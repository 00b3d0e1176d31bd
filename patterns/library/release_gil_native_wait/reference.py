"""Plain PyTorch reference: the layer stack in float64, the written pool pages gathered per layer."""
import torch


def make_inputs(shape: dict, seed: int, device: str = "cpu") -> dict:
    T, D, L, PAGE = shape["T"], shape["D"], shape["L"], shape["PAGE"]
    n_pages = -(-T // PAGE)
    g = torch.Generator().manual_seed(seed)
    h = torch.randn(T, D, generator=g)
    w = torch.randn(L, D, D, generator=g) / (2 * D**0.5)
    # a pool with more pages than the request uses; the request's pages are scattered
    kv_cache = torch.randn(L, n_pages + 3, PAGE, D, generator=g)
    page_ids = torch.randperm(n_pages + 3, generator=g)[:n_pages]
    out = {k: v.to(device=device, dtype=torch.float32) for k, v in dict(h=h, w=w, kv_cache=kv_cache).items()}
    out["page_ids"] = page_ids.to(device)
    return out


def reference(h: torch.Tensor, w: torch.Tensor, kv_cache: torch.Tensor, page_ids: torch.Tensor):
    T, D = h.shape
    L, P, PAGE, _ = kv_cache.shape
    slots = (page_ids[:, None] * PAGE + torch.arange(PAGE, device=page_ids.device)).flatten()[:T]
    kv = kv_cache.double().reshape(L, P * PAGE, D)
    x = h.double()
    for i_l in range(L):
        x = x + x @ w[i_l].double()
        kv[i_l, slots] = x
    sent = kv.reshape(L, P, PAGE, D)[:, page_ids]
    return x.float(), sent.float()
