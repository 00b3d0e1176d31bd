"""Plain PyTorch reference: GQA decode attention, one query token per sequence, in float64."""
import torch


def make_inputs(shape: dict, seed: int, device: str = "cpu") -> dict:
    B, HKV, G, N, D = shape["B"], shape["HKV"], shape["G"], shape["N"], shape["D"]
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(B, HKV * G, D, generator=g)
    k_cache = torch.randn(B, N, HKV, D, generator=g)
    v_cache = torch.randn(B, N, HKV, D, generator=g)
    seq_lens = torch.randint(1, N + 1, (B,), generator=g, dtype=torch.int32)
    seq_lens[0] = N
    out = {n: t.to(device=device, dtype=torch.bfloat16) for n, t in dict(q=q, k_cache=k_cache, v_cache=v_cache).items()}
    out["seq_lens"] = seq_lens.to(device)
    return out


def reference(q, k_cache, v_cache, seq_lens):
    B, HQ, D = q.shape
    G = HQ // k_cache.shape[2]
    o = torch.empty(B, HQ, D, dtype=torch.float64)
    for i_b in range(B):
        n = int(seq_lens[i_b])
        # every query head h reads KV head h // G
        k = k_cache[i_b, :n].double().repeat_interleave(G, dim=1)
        v = v_cache[i_b, :n].double().repeat_interleave(G, dim=1)
        s = torch.einsum("hd,nhd->hn", q[i_b].double(), k) * D**-0.5
        o[i_b] = torch.einsum("hn,nhd->hd", torch.softmax(s, -1), v)
    return o.float()
