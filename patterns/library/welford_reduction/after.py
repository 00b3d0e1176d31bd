"""Per-row statistics for a normalisation layer: mean and rstd = 1/sqrt(var + eps).

One pass with a Welford/Chan merge: each tile yields (count, mean, M2) with M2 the
sum of squared deviations from the tile's own mean, and tiles are merged with
delta = mean_b - mean_a. Nothing ever holds D·mean², so no cancellation.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def welford_combine(n_a, mean_a, m2_a, n_b, mean_b, m2_b):
    n = n_a + n_b
    delta = mean_b - mean_a
    w_b = tl.where(n > 0, n_b / tl.maximum(n, 1.0), 0.0)
    return n, mean_a + delta * w_b, m2_a + m2_b + delta * delta * n_a * w_b


@triton.jit
def row_stats_fwd_kernel(x, mean, rstd, eps, D, BD: tl.constexpr):
    i_t = tl.program_id(0).to(tl.int64)
    p_x = x + i_t * D

    b_n = tl.zeros([], dtype=tl.float32)
    b_mean = tl.zeros([], dtype=tl.float32)
    b_m2 = tl.zeros([], dtype=tl.float32)
    for i_d in range(0, D, BD):
        o_d = i_d + tl.arange(0, BD)
        m_d = o_d < D
        # [BD]
        b_x = tl.load(p_x + o_d, mask=m_d, other=0.0).to(tl.float32)
        b_nt = tl.minimum(D - i_d, BD).to(tl.float32)
        b_mt = tl.sum(b_x, 0) / b_nt
        b_xc = tl.where(m_d, b_x - b_mt, 0.0)
        b_n, b_mean, b_m2 = welford_combine(b_n, b_mean, b_m2, b_nt, b_mt, tl.sum(b_xc * b_xc, 0))
    tl.store(mean + i_t, b_mean)
    tl.store(rstd + i_t, 1 / tl.sqrt(b_m2 / D + eps))


def row_stats(x: torch.Tensor, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    T, D = x.shape
    mean = torch.empty(T, dtype=torch.float32, device=x.device)
    rstd = torch.empty(T, dtype=torch.float32, device=x.device)
    row_stats_fwd_kernel[(T,)](x, mean, rstd, eps, D, BD=64)
    return mean, rstd
