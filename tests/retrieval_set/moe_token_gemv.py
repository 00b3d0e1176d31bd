"""MoE up-projection written per routed token: one program per (token, slot) and output block reads its expert's weights."""
import torch
import triton
import triton.language as tl


@triton.jit
def moe_token_kernel(hidden, weights, out, expert_of, N, K, TOPK: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pair = tl.program_id(0).to(tl.int64)
    pid_n = tl.program_id(1)
    expert = tl.load(expert_of + pair).to(tl.int64)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tl.zeros([BLOCK_N], dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        offs_k = k0 + tl.arange(0, BLOCK_K)
        h = tl.load(hidden + (pair // TOPK) * K + offs_k, mask=offs_k < K, other=0.0)
        w = tl.load(weights + expert * N * K + offs_n[:, None] * K + offs_k[None, :], mask=(offs_n[:, None] < N) & (offs_k[None, :] < K), other=0.0)
        acc += tl.sum(w * h[None, :], 1)
    tl.store(out + pair * N + offs_n, acc, mask=offs_n < N)


def moe_up(hidden, weights, topk_ids):
    M, top_k = topk_ids.shape
    E, N, K = weights.shape
    out = torch.empty(M * top_k, N, dtype=torch.float32, device=hidden.device)
    moe_token_kernel[(M * top_k, triton.cdiv(N, 32))](hidden, weights, out, topk_ids, N, K, TOPK=top_k, BLOCK_N=32, BLOCK_K=32)
    return out
