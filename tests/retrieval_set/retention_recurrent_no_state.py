"""Retention (RetNet) decode-style recurrence per head, h = γ·h + kᵀv, o = q·h, started from zero and discarded after the loop."""
import torch
import triton
import triton.language as tl


@triton.jit
def retention_recurrent_kernel(q, k, v, o, gamma, T, DK: tl.constexpr, DV: tl.constexpr):
    bh = tl.program_id(0).to(tl.int64)
    offs_k = tl.arange(0, DK)
    offs_v = tl.arange(0, DV)
    g = tl.load(gamma + bh)
    h = tl.zeros([DK, DV], dtype=tl.float32)
    for t in range(0, T):
        kt = tl.load(k + (bh * T + t) * DK + offs_k)
        vt = tl.load(v + (bh * T + t) * DV + offs_v)
        qt = tl.load(q + (bh * T + t) * DK + offs_k)
        h = h * g + kt[:, None] * vt[None, :]
        tl.store(o + (bh * T + t) * DV + offs_v, tl.sum(h * qt[:, None], 0))


def retention(q, k, v, gamma):
    BH, T, DK = q.shape
    DV = v.shape[-1]
    o = torch.empty(BH, T, DV, dtype=torch.float32, device=q.device)
    retention_recurrent_kernel[(BH,)](q, k, v, o, gamma, T, DK=DK, DV=DV)
    return o
