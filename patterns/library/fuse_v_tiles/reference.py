"""Plain PyTorch reference: one KDA decode step per (sequence, head) in float64."""
import torch


def make_inputs(shape: dict, seed: int, device: str = "cpu") -> dict:
    B, H, K, V = shape["B"], shape["H"], shape["K"], shape["V"]
    g = torch.Generator().manual_seed(seed)
    bf16 = dict(
        q=torch.randn(B, H, K, generator=g),
        k=torch.randn(B, H, K, generator=g),
        v=torch.randn(B, H, V, generator=g),
        g=torch.randn(B, H, K, generator=g),
        beta=torch.randn(B, H, generator=g),
    )
    fp32 = dict(
        A_log=torch.rand(H, generator=g) - 0.5,
        dt_bias=0.5 * torch.randn(H, K, generator=g),
        h=0.1 * torch.randn(B, H, K, V, generator=g),
    )
    out = {n: t.to(device=device, dtype=torch.bfloat16) for n, t in bf16.items()}
    out.update({n: t.to(device=device, dtype=torch.float32) for n, t in fp32.items()})
    return out


def reference(q, k, v, g, beta, A_log, dt_bias, h):
    """o_t = h_t^T q and h_t = diag(a) h_{t-1} + k (beta (v - (diag(a) h_{t-1})^T k))^T."""
    B, H, K = q.shape
    q, k, v, g, beta = (t.double() for t in (q, k, v, g, beta))
    h = h.double().clone()
    q = q / torch.sqrt((q * q).sum(-1, keepdim=True) + 1e-6) * K**-0.5
    k = k / torch.sqrt((k * k).sum(-1, keepdim=True) + 1e-6)
    gk = -torch.exp(A_log.double())[None, :, None] * torch.nn.functional.softplus(g + dt_bias.double()[None])
    b = torch.sigmoid(beta)
    o = torch.empty_like(v)
    for i_b in range(B):
        for i_h in range(H):
            s = h[i_b, i_h] * torch.exp(gk[i_b, i_h])[:, None]
            u = b[i_b, i_h] * (v[i_b, i_h] - k[i_b, i_h] @ s)
            s = s + torch.outer(k[i_b, i_h], u)
            o[i_b, i_h] = q[i_b, i_h] @ s
            h[i_b, i_h] = s
    return o.float(), h.float()
