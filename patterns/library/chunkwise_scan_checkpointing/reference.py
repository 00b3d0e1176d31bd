"""Plain PyTorch reference: gated linear attention token by token in float64."""
import torch


def make_inputs(shape: dict, seed: int, device: str = "cpu") -> dict:
    B, T, H, K, V = shape["B"], shape["T"], shape["H"], shape["K"], shape["V"]
    gen = torch.Generator().manual_seed(seed)
    bf16 = dict(
        q=torch.randn(B, T, H, K, generator=gen),
        k=torch.randn(B, T, H, K, generator=gen) * K**-0.5,
        v=torch.randn(B, T, H, V, generator=gen),
    )
    out = {n: t.to(device=device, dtype=torch.bfloat16) for n, t in bf16.items()}
    # log decay per token and head, in (-inf, 0): the state forgets at rate exp(g)
    out["g"] = torch.nn.functional.logsigmoid(torch.randn(B, T, H, generator=gen) + 3.0).to(device)
    return out


def reference(q, k, v, g):
    """h_t = exp(g_t) h_{t-1} + k_t v_tᵀ, o_t = K^-1/2 · h_tᵀ q_t; returns (o, h_T)."""
    B, T, H, K = q.shape
    q, k, v, g = (t.double() for t in (q, k, v, g))
    h = torch.zeros(B, H, K, v.shape[-1], dtype=torch.float64)
    o = torch.empty_like(v)
    for t in range(T):
        h = h * torch.exp(g[:, t])[..., None, None] + k[:, t, :, :, None] * v[:, t, :, None, :]
        o[:, t] = torch.einsum("bhk,bhkv->bhv", q[:, t], h) * K**-0.5
    return o.float(), h.float()
