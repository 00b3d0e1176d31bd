# refuse: the load on line 15 reads rows gathered through `slot`, loaded from memory: not a tile
# paged KV: the rows of the tile are gathered through a block table read from memory
import torch
import triton
import triton.language as tl


@triton.jit
def paged_kv_gather_kernel(k_cache, block_table, out, T, D: tl.constexpr, BT: tl.constexpr):
    i_b, i_t = tl.program_id(0), tl.program_id(1)
    o_t = i_t * BT + tl.arange(0, BT)
    o_d = tl.arange(0, D)
    m_t = o_t < T
    slot = tl.load(block_table + i_b * T + o_t, mask=m_t, other=0)
    b_k = tl.load(k_cache + slot[:, None] * D + o_d[None, :], mask=m_t[:, None], other=0.0)
    tl.store(out + (i_b * T + o_t[:, None]) * D + o_d[None, :], b_k, mask=m_t[:, None])


def paged_kv_gather(k_cache, block_table):
    B, T = block_table.shape
    D = k_cache.shape[-1]
    out = torch.empty(B, T, D, device=k_cache.device, dtype=k_cache.dtype)
    paged_kv_gather_kernel[(B, triton.cdiv(T, 32))](k_cache, block_table, out, T, D=D, BT=32)
    return out
