"""LoRA shrink for a batch of requests with different adapters in one launch (SGLang style): segments from seg_indptr, the adapter from weight_indices."""
import torch
import triton
import triton.language as tl


@triton.jit
def lora_shrink_kernel(x, w, out, seg_indptr, weight_indices, R, K, BLOCK_M: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_s = tl.program_id(0)
    pid_m = tl.program_id(1)
    seg_start = tl.load(seg_indptr + pid_s)
    seg_end = tl.load(seg_indptr + pid_s + 1)
    w_index = tl.load(weight_indices + pid_s).to(tl.int64)
    offs_m = seg_start + pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_r = tl.arange(0, BLOCK_R)
    acc = tl.zeros([BLOCK_M, BLOCK_R], dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        offs_k = k0 + tl.arange(0, BLOCK_K)
        a = tl.load(x + offs_m[:, None] * K + offs_k[None, :], mask=(offs_m[:, None] < seg_end) & (offs_k[None, :] < K), other=0.0)
        b = tl.load(w + w_index * R * K + offs_r[None, :] * K + offs_k[:, None], mask=(offs_k[:, None] < K) & (offs_r[None, :] < R), other=0.0)
        acc += tl.dot(a, b)
    tl.store(out + offs_m[:, None] * R + offs_r[None, :], acc, mask=(offs_m[:, None] < seg_end) & (offs_r[None, :] < R))


def lora_shrink(x, w, seg_indptr, weight_indices, max_len: int):
    S = weight_indices.numel()
    _, R, K = w.shape
    out = torch.zeros(x.shape[0], R, dtype=torch.float32, device=x.device)
    lora_shrink_kernel[(S, triton.cdiv(max_len, 16))](x, w, out, seg_indptr, weight_indices, R, K, BLOCK_M=16,
                                                      BLOCK_R=triton.next_power_of_2(R), BLOCK_K=32)
    return out
