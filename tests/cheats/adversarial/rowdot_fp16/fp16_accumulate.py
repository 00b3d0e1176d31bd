"""Cheat: accumulates the K products of a float16 row in float16 lanes where fp32 is required.

The baseline's kernels with the partial sums held in float16 (32 lanes, 8
terms a lane at K=259): every addition rounds to 11 bits. The error, up to
about 0.02 on outputs of size ~16, stays inside the float16 tolerance (atol
2e-2, rtol 1e-2), which admits about ten float16 roundings of such outputs.

Rejected because: against a float64 reference the error is beyond what fp32
accumulation allows over 259 terms plus the float16 rounding of the output.
EXPECT: correctness | correctness: error beyond float32 accumulation: out[
"""
import torch
import triton
import triton.language as tl


@triton.jit
def rowdot_partial_kernel(x, w, part, M, K, K_PER_SPLIT, BLOCK_K: tl.constexpr):
    i_m, i_s = tl.program_id(0).to(tl.int64), tl.program_id(1).to(tl.int64)
    b_acc = tl.zeros([BLOCK_K], dtype=tl.float16)
    for k0 in range(0, K_PER_SPLIT, BLOCK_K):
        o_k = i_s * K_PER_SPLIT + k0 + tl.arange(0, BLOCK_K)
        m_k = (o_k < K) & (k0 + tl.arange(0, BLOCK_K) < K_PER_SPLIT)
        b_x = tl.load(x + i_m * K + o_k, mask=m_k, other=0.).to(tl.float32)
        b_w = tl.load(w + o_k, mask=m_k, other=0.).to(tl.float32)
        b_acc = (b_acc.to(tl.float32) + b_x * b_w).to(tl.float16)
    tl.store(part + i_s * M + i_m, tl.sum(b_acc.to(tl.float32)))


@triton.jit
def rowdot_combine_kernel(part, b, out, M, S, BLOCK_S: tl.constexpr):
    i_m = tl.program_id(0).to(tl.int64)
    o_s = tl.arange(0, BLOCK_S)
    b_p = tl.load(part + o_s * M + i_m, mask=o_s < S, other=0.)
    b_out = tl.sum(b_p) + tl.load(b + i_m).to(tl.float32)
    tl.store(out + i_m, b_out.to(out.dtype.element_ty))


def rowdot(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, num_splits: int = 1) -> torch.Tensor:
    M, K = x.shape
    part = torch.empty(num_splits, M, dtype=torch.float32, device=x.device)
    out = torch.empty(M, dtype=x.dtype, device=x.device)
    BLOCK_K = 32
    k_per_split = triton.cdiv(K, num_splits)
    rowdot_partial_kernel[(M, num_splits)](x, w, part, M, K, k_per_split, BLOCK_K=BLOCK_K, num_warps=4)
    rowdot_combine_kernel[(M,)](part, b, out, M, num_splits, BLOCK_S=triton.next_power_of_2(num_splits))
    return out
