"""Plain PyTorch reference for KDA decode: the gated delta rule, one token at a time, in fp32 (float64 for float64 inputs)."""
import torch
import torch.nn.functional as F

from patterns.kernels.common import at_least_fp32


def naive_kda_decode(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    A_log: torch.Tensor,
    dt_bias: torch.Tensor,
    state: torch.Tensor,
    scale: float | None = None,
) -> torch.Tensor:
    r"""
    Args:
        q, k: `[B, T, H, K]`, L2-normalised here.
        v: `[B, T, HV, V]`; GQA when `HV > H` (value head `i` reads query/key head `i // (HV // H)`).
        g: `[B, T, HV, K]` raw gate, activated as `-exp(A_log) * softplus(g + dt_bias)`.
        beta: `[B, T, HV]` logits, activated with a sigmoid.
        A_log: `[HV]`.
        dt_bias: `[HV * K]`.
        state: `[B, HV, K, V]` fp32, updated in place with the state after the last token.
        scale: defaults to `K ** -0.5`.

    Returns:
        o: `[B, T, HV, V]` in `v.dtype`.
    """
    B, T, H, K = q.shape
    HV, V = v.shape[2], v.shape[3]
    G = HV // H
    if scale is None:
        scale = K ** -0.5
    q, k, v, g, beta = (at_least_fp32(x) for x in (q, k, v, g, beta))
    q = q / torch.sqrt((q * q).sum(-1, keepdim=True) + 1e-6) * scale
    k = k / torch.sqrt((k * k).sum(-1, keepdim=True) + 1e-6)
    q, k = q.repeat_interleave(G, dim=2), k.repeat_interleave(G, dim=2)
    g = -at_least_fp32(A_log).exp()[:, None] * F.softplus(g + at_least_fp32(dt_bias).view(HV, K))
    beta = beta.sigmoid()

    S = at_least_fp32(state).clone()
    o = torch.zeros(B, T, HV, V, dtype=S.dtype, device=v.device)
    for t in range(T):
        q_t, k_t, v_t, g_t, b_t = q[:, t], k[:, t], v[:, t], g[:, t], beta[:, t]
        S = S * g_t.exp()[..., None]
        u_t = b_t[..., None] * (v_t - torch.einsum('b h k, b h k v -> b h v', k_t, S))
        S = S + torch.einsum('b h k, b h v -> b h k v', k_t, u_t)
        o[:, t] = torch.einsum('b h k, b h k v -> b h v', q_t, S)
    state.copy_(S)
    return o.to(v.dtype)
