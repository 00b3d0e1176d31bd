"""Plain PyTorch reference for FLA 0.6.0's fused_recurrent_kda_fwd (fla/ops/kda/fused_recurrent.py),
in the configuration a served model decodes with: the gate activated in the kernel
(-exp(A_log) * softplus(g + dt_bias)), q and k L2-normalised in the kernel, beta through a
sigmoid, the state updated in place. Written for this project; the math is the gated delta
rule of the kernel's loop (lines 151-205 of that file), one token at a time in fp32."""
import torch
import torch.nn.functional as F

MODELLED = dict(use_qk_l2norm_in_kernel=True, use_gate_in_kernel=True, use_beta_sigmoid_in_kernel=True, inplace_final_state=True)


def fused_recurrent_kda_fwd(q, k, v, g, beta, A_log, dt_bias, initial_state, scale=None, **flags):
    """o [B, T, HV, V] in v.dtype and the final state (initial_state, updated in place)."""
    other = {k_: v_ for k_, v_ in flags.items() if MODELLED.get(k_, v_) != v_ or (k_ not in MODELLED and v_)}
    if other:
        raise ValueError(f"the reference models {MODELLED}, not {other}")
    B, T, H, K = q.shape
    HV, V = v.shape[2], v.shape[3]
    G = HV // H
    scale = K ** -0.5 if scale is None else scale
    q, k, v, g, beta = (x.float() for x in (q, k, v, g, beta))
    q = q / torch.sqrt((q * q).sum(-1, keepdim=True) + 1e-6) * scale
    k = k / torch.sqrt((k * k).sum(-1, keepdim=True) + 1e-6)
    q, k = q.repeat_interleave(G, dim=2), k.repeat_interleave(G, dim=2)
    g = -A_log.float().exp()[:, None] * F.softplus(g + dt_bias.float().view(HV, K))
    beta = beta.sigmoid()
    S = initial_state.float().clone()
    o = torch.zeros(B, T, HV, V, dtype=torch.float32, device=v.device)
    for t in range(T):
        S = S * g[:, t].exp()[..., None]
        u = beta[:, t, :, None] * (v[:, t] - torch.einsum("bhk,bhkv->bhv", k[:, t], S))
        S = S + torch.einsum("bhk,bhv->bhkv", k[:, t], u)
        o[:, t] = torch.einsum("bhk,bhkv->bhv", q[:, t], S)
    initial_state.copy_(S)
    return o.to(v.dtype), initial_state
