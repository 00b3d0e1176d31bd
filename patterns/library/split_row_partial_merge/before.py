"""Row-wise log-sum-exp over a long row (a vocabulary of logits): lse[m] = log Σ_n exp(x[m, n]).

The kernel walks each row in [BN] tiles with a running max b_m and a
running sum b_l of exp(x - b_m), rescaled whenever the max grows.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def row_lse_fwd_kernel(x, lse, N, BN: tl.constexpr):
    i_m = tl.program_id(0).to(tl.int64)
    b_m = tl.full([], float('-inf'), dtype=tl.float32)
    b_l = tl.zeros([], dtype=tl.float32)
    for i_n in range(0, N, BN):
        o_n = i_n + tl.arange(0, BN)
        # [BN]
        b_x = tl.load(x + i_m * N + o_n, mask=o_n < N, other=float('-inf')).to(tl.float32)
        b_m, b_mp = tl.maximum(b_m, tl.max(b_x, 0)), b_m
        b_l = b_l * tl.exp(b_mp - b_m) + tl.sum(tl.exp(b_x - b_m), 0)
    tl.store(lse + i_m, b_m + tl.log(b_l))


def row_logsumexp(x: torch.Tensor) -> torch.Tensor:
    M, N = x.shape
    lse = torch.empty(M, dtype=torch.float32, device=x.device)
    row_lse_fwd_kernel[(M,)](x, lse, N, BN=256)
    return lse
