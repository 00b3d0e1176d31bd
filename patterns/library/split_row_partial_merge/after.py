"""Row-wise log-sum-exp over a long row (a vocabulary of logits): lse[m] = log Σ_n exp(x[m, n]).

The kernel walks each row in [BN] tiles with a running max b_m and a
running sum b_l of exp(x - b_m), rescaled whenever the max grows.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def row_lse_fwd_kernel(x, lse, N, m_part, l_part, NUM_SPLITS, BN: tl.constexpr):
    i_m = tl.program_id(0).to(tl.int64)
    i_s = tl.program_id(1)
    b_m = tl.full([], float('-inf'), dtype=tl.float32)
    b_l = tl.zeros([], dtype=tl.float32)
    split = tl.cdiv(tl.cdiv(N, NUM_SPLITS), BN) * BN
    for i_n in range(i_s * split, tl.minimum(i_s * split + split, N), BN):
        o_n = i_n + tl.arange(0, BN)
        # [BN]
        b_x = tl.load(x + i_m * N + o_n, mask=o_n < N, other=float('-inf')).to(tl.float32)
        b_m, b_mp = tl.maximum(b_m, tl.max(b_x, 0)), b_m
        b_l = b_l * tl.exp(b_mp - b_m) + tl.sum(tl.exp(b_x - b_m), 0)
    # this split's partial statistics; row_lse_fwd_kernel_merge combines them
    tl.store(m_part + i_m * NUM_SPLITS + i_s, b_m)
    tl.store(l_part + i_m * NUM_SPLITS + i_s, b_l)


@triton.jit
def row_lse_fwd_kernel_merge(m_part, l_part, lse, NUM_SPLITS, BS: tl.constexpr):
    i_m = tl.program_id(0).to(tl.int64)
    o_s = tl.arange(0, BS)
    b_ms = tl.load(m_part + i_m * NUM_SPLITS + o_s, mask=o_s < NUM_SPLITS, other=float('-inf'))
    b_ls = tl.load(l_part + i_m * NUM_SPLITS + o_s, mask=o_s < NUM_SPLITS, other=0.0)
    b_m = tl.max(b_ms, 0)
    # empty splits hold (-inf, 0) and add nothing
    b_l = tl.sum(b_ls * tl.exp(b_ms - b_m), 0)
    tl.store(lse + i_m, b_m + tl.log(b_l))


def row_logsumexp(x: torch.Tensor) -> torch.Tensor:
    M, N = x.shape
    lse = torch.empty(M, dtype=torch.float32, device=x.device)
    # split each row until about 512 programs are in flight
    num_splits = max(1, min(triton.cdiv(N, 256), triton.cdiv(512, M)))
    m_part = torch.empty(M, num_splits, dtype=torch.float32, device=x.device)
    l_part = torch.empty_like(m_part)
    row_lse_fwd_kernel[(M, num_splits)](x, lse, N, m_part, l_part, num_splits, BN=256)
    row_lse_fwd_kernel_merge[(M,)](m_part, l_part, lse, num_splits, BS=triton.next_power_of_2(num_splits))
    return lse
