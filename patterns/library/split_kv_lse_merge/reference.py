"""Plain PyTorch reference: softmax attention of one query token per sequence, in float64."""
import torch


def make_inputs(shape: dict, seed: int, device: str = "cpu") -> dict:
    B, H, N, D = shape["B"], shape["H"], shape["N"], shape["D"]
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(B, H, D, generator=g)
    k_cache = torch.randn(B, N, H, D, generator=g)
    v_cache = torch.randn(B, N, H, D, generator=g)
    # ragged lengths, including one far shorter than the cache, so some KV splits are empty
    seq_lens = torch.randint(1, N + 1, (B,), generator=g, dtype=torch.int32)
    seq_lens[0] = N
    seq_lens[-1] = min(int(seq_lens[-1]), 5)
    out = {n: t.to(device=device, dtype=torch.bfloat16) for n, t in dict(q=q, k_cache=k_cache, v_cache=v_cache).items()}
    out["seq_lens"] = seq_lens.to(device)
    return out


def reference(q, k_cache, v_cache, seq_lens):
    B, H, D = q.shape
    o = torch.empty(B, H, D, dtype=torch.float64)
    for i_b in range(B):
        n = int(seq_lens[i_b])
        k, v = k_cache[i_b, :n].double(), v_cache[i_b, :n].double()
        # [H, n]
        s = torch.einsum("hd,nhd->hn", q[i_b].double(), k) * D**-0.5
        o[i_b] = torch.einsum("hn,nhd->hd", torch.softmax(s, -1), v)
    return o.float()
