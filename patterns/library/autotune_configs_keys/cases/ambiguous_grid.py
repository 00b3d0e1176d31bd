# refuse: cannot tell which block `triton.cdiv\(w.shape\[0\], 64\)` counts
# nn.Linear-shaped weight: one grid literal (64) matches both BM and BN
import torch
import triton
import triton.language as tl


@triton.jit
def linear_kernel(x, w, y, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    i_m, i_n = tl.program_id(0), tl.program_id(1)
    o_m = i_m * BM + tl.arange(0, BM)
    o_n = i_n * BN + tl.arange(0, BN)
    o_k = tl.arange(0, BK)
    b_acc = tl.zeros([BM, BN], dtype=tl.float32)
    for k in range(0, K, BK):
        b_x = tl.load(x + o_m[:, None] * K + (k + o_k)[None, :], mask=(o_m[:, None] < M) & ((k + o_k)[None, :] < K), other=0.0)
        b_w = tl.load(w + o_n[:, None] * K + (k + o_k)[None, :], mask=(o_n[:, None] < N) & ((k + o_k)[None, :] < K), other=0.0)
        b_acc = tl.dot(b_x, tl.trans(b_w), b_acc)
    tl.store(y + o_m[:, None] * N + o_n[None, :], b_acc, mask=(o_m[:, None] < M) & (o_n[None, :] < N))


def linear(x, w, out_features):
    M, K = x.shape
    y = torch.empty(M, out_features, device=x.device, dtype=torch.float32)
    linear_kernel[(triton.cdiv(M, 64), triton.cdiv(w.shape[0], 64))](x, w, y, M, out_features, K, BM=64, BN=64, BK=32)
    return y
