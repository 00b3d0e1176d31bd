"""Decode attention over a paged KV pool: the step first copies every request's pages out with index_select, then a contiguous kernel runs."""
import torch
import triton
import triton.language as tl


@triton.jit
def contiguous_decode_kernel(q, k, v, lens, o, scale, T_max, H: tl.constexpr, D: tl.constexpr, BLOCK_N: tl.constexpr):
    b, h = tl.program_id(0).to(tl.int64), tl.program_id(1).to(tl.int64)
    offs_d = tl.arange(0, D)
    n = tl.load(lens + b)
    qv = tl.load(q + (b * H + h) * D + offs_d)
    m_i = float("-inf")
    l_i = 0.0
    acc = tl.zeros([D], dtype=tl.float32)
    for start in range(0, n, BLOCK_N):
        offs_n = start + tl.arange(0, BLOCK_N)
        mask = offs_n < n
        kt = tl.load(k + ((b * T_max + offs_n[:, None]) * H + h) * D + offs_d[None, :], mask=mask[:, None], other=0.0)
        vt = tl.load(v + ((b * T_max + offs_n[:, None]) * H + h) * D + offs_d[None, :], mask=mask[:, None], other=0.0)
        s = tl.where(mask, tl.sum(kt * qv[None, :], 1) * scale, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 0))
        p = tl.exp(s - m_new)
        alpha = tl.exp(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 0)
        acc = acc * alpha + tl.sum(p[:, None] * vt, 0)
        m_i = m_new
    tl.store(o + (b * H + h) * D + offs_d, acc / l_i)


def paged_decode(q, k_pool, v_pool, block_table, seq_lens, PAGE: int):
    B, H, D = q.shape
    slots = (block_table.long()[:, :, None] * PAGE + torch.arange(PAGE, device=q.device)).flatten(1)
    k = torch.index_select(k_pool, 0, slots.flatten()).view(B, -1, H, D)
    v = torch.index_select(v_pool, 0, slots.flatten()).view(B, -1, H, D)
    o = torch.empty_like(q)
    contiguous_decode_kernel[(B, H)](q, k, v, seq_lens, o, D**-0.5, k.shape[1], H=H, D=D, BLOCK_N=16)
    return o
