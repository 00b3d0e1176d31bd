"""Plain PyTorch reference: the KDA recurrence token by token in float64."""
import torch


def make_inputs(shape: dict, seed: int, device: str = "cpu") -> dict:
    B, T, H, K, V = shape["B"], shape["T"], shape["H"], shape["K"], shape["V"]
    g = torch.Generator().manual_seed(seed)
    bf16 = dict(
        q=torch.randn(B, T, H, K, generator=g) * K**-0.5,
        k=torch.nn.functional.normalize(torch.randn(B, T, H, K, generator=g), dim=-1),
        v=torch.randn(B, T, H, V, generator=g),
        g=torch.randn(B, T, H, K, generator=g),
        beta=torch.randn(B, T, H, generator=g),
    )
    fp32 = dict(
        A_log=torch.rand(H, generator=g) - 0.5,
        dt_bias=0.5 * torch.randn(H, K, generator=g),
        h0=0.1 * torch.randn(B, H, K, V, generator=g),
    )
    out = {n: t.to(device=device, dtype=torch.bfloat16) for n, t in bf16.items()}
    out.update({n: t.to(device=device, dtype=torch.float32) for n, t in fp32.items()})
    return out


def reference(q, k, v, g, beta, A_log, dt_bias, h0):
    """h_t = diag(a_t) h_{t-1} + k_t (b_t (v_t - (diag(a_t) h_{t-1})^T k_t))^T, o_t = h_t^T q_t."""
    B, T, H, K = q.shape
    q, k, v, g, beta = (t.double() for t in (q, k, v, g, beta))
    gk = -torch.exp(A_log.double())[:, None] * torch.nn.functional.softplus(g + dt_bias.double())
    b = torch.sigmoid(beta)
    h = h0.double().clone()
    o = torch.empty_like(v)
    for t in range(T):
        h = h * torch.exp(gk[:, t])[..., None]
        u = b[:, t, :, None] * (v[:, t] - torch.einsum("bhk,bhkv->bhv", k[:, t], h))
        h = h + k[:, t, :, :, None] * u[:, :, None, :]
        o[:, t] = torch.einsum("bhk,bhkv->bhv", q[:, t], h)
    return o.float(), h.float()
