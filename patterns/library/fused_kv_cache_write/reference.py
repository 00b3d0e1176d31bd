"""Plain PyTorch reference: rotate k (NeoX halves) in float64 and write k, v into the cache slots."""
import torch


def make_inputs(shape: dict, seed: int, device: str = "cpu") -> dict:
    T, H, D, S = shape["T"], shape["H"], shape["D"], shape["SLOTS"]
    g = torch.Generator().manual_seed(seed)
    ang = torch.rand(T, D // 2, generator=g) * 6.283
    t = dict(k=torch.randn(T, H, D, generator=g), v=torch.randn(T, H, D, generator=g), cos=ang.cos(), sin=ang.sin(),
             slot_mapping=torch.randperm(S, generator=g)[:T].to(torch.int32),
             k_cache=torch.randn(S, H, D, generator=g), v_cache=torch.randn(S, H, D, generator=g))
    return {n: x.to(device) for n, x in t.items()}


def reference(k, v, cos, sin, slot_mapping, k_cache, v_cache):
    D = k.shape[-1]
    k1, k2 = k[..., : D // 2].double(), k[..., D // 2:].double()
    c, s = cos.double()[:, None], sin.double()[:, None]
    k_rot = torch.cat([k1 * c - k2 * s, k2 * c + k1 * s], -1).float()
    k_cache, v_cache = k_cache.clone(), v_cache.clone()
    k_cache[slot_mapping.long()] = k_rot
    v_cache[slot_mapping.long()] = v
    return k_cache, v_cache
