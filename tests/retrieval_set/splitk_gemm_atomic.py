"""LoRA-A shrink GEMM (a long K, a few output tiles) already split along K.

Each of SPLIT_K programs per output tile reduces every SPLIT_K-th K block into an
fp32 partial and adds it into the fp32 output with an atomic: 4 output tiles
become 4·SPLIT_K programs.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def lora_shrink_splitk_kernel(x, w, y, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, SPLIT_K: tl.constexpr):
    i_m, i_n, i_s = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    o_m = i_m * BM + tl.arange(0, BM)
    o_n = i_n * BN + tl.arange(0, BN)
    # [BM, BN]
    b_acc = tl.zeros([BM, BN], dtype=tl.float32)
    for i_k in range(i_s * BK, K, SPLIT_K * BK):
        o_k = i_k + tl.arange(0, BK)
        b_x = tl.load(x + o_m[:, None] * K + o_k[None, :], mask=(o_m[:, None] < M) & (o_k[None, :] < K), other=0.0)
        b_w = tl.load(w + o_k[:, None] * N + o_n[None, :], mask=(o_k[:, None] < K) & (o_n[None, :] < N), other=0.0)
        b_acc += tl.dot(b_x, b_w)
    tl.atomic_add(y + o_m[:, None] * N + o_n[None, :], b_acc, mask=(o_m[:, None] < M) & (o_n[None, :] < N))


def lora_shrink(x: torch.Tensor, w: torch.Tensor, split_k: int = 16) -> torch.Tensor:
    M, K = x.shape
    N = w.shape[1]
    y = torch.zeros(M, N, device=x.device, dtype=torch.float32)
    grid = (triton.cdiv(M, 64), triton.cdiv(N, 64), split_k)
    lora_shrink_splitk_kernel[grid](x, w, y, M, N, K, BM=64, BN=64, BK=64, SPLIT_K=split_k)
    return y
