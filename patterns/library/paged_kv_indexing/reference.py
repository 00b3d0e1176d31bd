"""Plain PyTorch reference: each request's pages gathered, then attention in float64."""
import torch


def make_inputs(shape: dict, seed: int, device: str = "cpu") -> dict:
    B, H, D, PAGE, MAX_PAGES = shape["B"], shape["H"], shape["D"], shape["PAGE"], shape["MAX_PAGES"]
    g = torch.Generator().manual_seed(seed)
    seq_lens = torch.randint(1, MAX_PAGES * PAGE + 1, (B,), generator=g).to(torch.int32)
    page_table = torch.randperm(B * MAX_PAGES, generator=g).to(torch.int32).view(B, MAX_PAGES)
    k_cache = torch.randn(B * MAX_PAGES * PAGE, H, D, generator=g)
    v_cache = torch.randn(B * MAX_PAGES * PAGE, H, D, generator=g)
    q = torch.randn(B, H, D, generator=g)
    t = dict(q=q, k_cache=k_cache, v_cache=v_cache, page_table=page_table, seq_lens=seq_lens)
    return {**{n: x.to(device) for n, x in t.items()}, "PAGE": PAGE}


def reference(q, k_cache, v_cache, page_table, seq_lens, PAGE):
    out = torch.empty_like(q)
    for b in range(q.shape[0]):
        rows = (page_table[b].long()[:, None] * PAGE + torch.arange(PAGE)).flatten()[: int(seq_lens[b])]
        kb, vb = k_cache[rows].double().transpose(0, 1), v_cache[rows].double().transpose(0, 1)  # [H, T, D]
        s = (kb @ q[b].double()[:, :, None])[..., 0] * q.shape[-1] ** -0.5
        out[b] = (torch.softmax(s, -1)[:, None, :] @ vb)[:, 0].float()
    return out
