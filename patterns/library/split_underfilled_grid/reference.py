"""Plain PyTorch reference: one gated-delta-rule decode step per (sequence, head) in float64."""
import torch


def make_inputs(shape: dict, seed: int, device: str = "cpu") -> dict:
    B, H, K, V = shape["B"], shape["H"], shape["K"], shape["V"]
    g = torch.Generator().manual_seed(seed)
    bf16 = dict(
        q=torch.randn(B, H, K, generator=g),
        k=torch.randn(B, H, K, generator=g),
        v=torch.randn(B, H, V, generator=g),
        a=torch.randn(B, H, generator=g),
        b=torch.randn(B, H, generator=g),
    )
    fp32 = dict(
        A_log=torch.rand(H, generator=g) - 0.5,
        dt_bias=0.5 * torch.randn(H, generator=g),
        h=0.1 * torch.randn(B, H, K, V, generator=g),
    )
    out = {n: t.to(device=device, dtype=torch.bfloat16) for n, t in bf16.items()}
    out.update({n: t.to(device=device, dtype=torch.float32) for n, t in fp32.items()})
    return out


def reference(q, k, v, a, b, A_log, dt_bias, h):
    """h' = exp(g) h + k (beta (v - exp(g) h^T k))^T, o = h'^T q, with scalar g and beta per head."""
    B, H, K = q.shape
    q, k, v, a, b = (t.double() for t in (q, k, v, a, b))
    q = q / torch.sqrt((q * q).sum(-1, keepdim=True) + 1e-6) * K**-0.5
    k = k / torch.sqrt((k * k).sum(-1, keepdim=True) + 1e-6)
    g = -torch.exp(A_log.double()) * torch.nn.functional.softplus(a + dt_bias.double())
    beta = torch.sigmoid(b)
    s = h.double() * torch.exp(g)[..., None, None]
    u = beta[..., None] * (v - torch.einsum("bhk,bhkv->bhv", k, s))
    s = s + k[..., :, None] * u[..., None, :]
    o = torch.einsum("bhk,bhkv->bhv", q, s)
    return o.float(), s.float()
