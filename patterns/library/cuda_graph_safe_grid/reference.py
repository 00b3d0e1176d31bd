"""Plain PyTorch reference: softmax attention of each sequence's query over its first seq_len keys, in float64."""
import torch


def make_inputs(shape: dict, seed: int, device: str = "cpu") -> dict:
    B, H, D, S_MAX = shape["B"], shape["H"], shape["D"], shape["S_MAX"]
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(B, H, D, generator=g)
    k = torch.randn(B, S_MAX, H, D, generator=g)
    v = torch.randn(B, S_MAX, H, D, generator=g)
    seq_lens = torch.randint(1, S_MAX + 1, (B,), generator=g, dtype=torch.int32)
    out = {n: t.to(device) for n, t in dict(q=q, k=k, v=v).items()}
    out["seq_lens"] = seq_lens.to(device)
    return out


def reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, seq_lens: torch.Tensor) -> torch.Tensor:
    B, H, D = q.shape
    o = torch.empty(B, H, D, dtype=torch.float64)
    for i_b in range(B):
        n = int(seq_lens[i_b])
        for i_h in range(H):
            s = (k[i_b, :n, i_h].double() @ q[i_b, i_h].double()) * D**-0.5
            o[i_b, i_h] = torch.softmax(s, 0) @ v[i_b, :n, i_h].double()
    return o.float()
