"""Causal prefill attention, one program per (query block, batch·head); every key block is visited and masked."""
import torch
import triton
import triton.language as tl


@triton.jit
def causal_prefill_kernel(Q, K, V, Out, sm_scale, seq_len, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    start_m = tl.program_id(0)
    off_bh = tl.program_id(1).to(tl.int64)
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    base = off_bh * seq_len * HEAD_DIM
    q = tl.load(Q + base + offs_m[:, None] * HEAD_DIM + offs_d[None, :], mask=offs_m[:, None] < seq_len, other=0.0)
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    for start_n in range(0, seq_len, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        k = tl.load(K + base + offs_n[:, None] * HEAD_DIM + offs_d[None, :], mask=offs_n[:, None] < seq_len, other=0.0)
        v = tl.load(V + base + offs_n[:, None] * HEAD_DIM + offs_d[None, :], mask=offs_n[:, None] < seq_len, other=0.0)
        qk = tl.dot(q, tl.trans(k)) * sm_scale
        causal = (offs_m[:, None] >= offs_n[None, :]) & (offs_n[None, :] < seq_len)
        qk = tl.where(causal, qk, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(qk, 1))
        alpha = tl.exp(m_i - m_new)
        p = tl.exp(qk - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p, v)
        m_i = m_new
    tl.store(Out + base + offs_m[:, None] * HEAD_DIM + offs_d[None, :], acc / l_i[:, None], mask=offs_m[:, None] < seq_len)


def causal_attention(q, k, v):
    BH, T, D = q.shape
    o = torch.empty_like(q)
    causal_prefill_kernel[(triton.cdiv(T, 32), BH)](q, k, v, o, D**-0.5, T, HEAD_DIM=D, BLOCK_M=32, BLOCK_N=32)
    return o
