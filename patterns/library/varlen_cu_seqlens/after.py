"""Per-sequence cumulative sum over a packed batch of variable-length sequences.

x is [total_T, H]: the sequences one after another, sequence b at rows
cu_seqlens[b]:cu_seqlens[b + 1]. One program per (sequence, head) reads its
bounds bos, eos from cu_seqlens and walks its own rows of the packed tensor:
no padding, no copies, and no length read back to the host.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def seg_cumsum_fwd_kernel(x, y, cu_seqlens, H, BT: tl.constexpr):
    i_n, i_h = tl.program_id(0).to(tl.int64), tl.program_id(1)
    bos, eos = tl.load(cu_seqlens + i_n).to(tl.int64), tl.load(cu_seqlens + i_n + 1).to(tl.int64)
    L = eos - bos
    b_c = tl.zeros([], dtype=tl.float32)
    for i_t in range(0, L, BT):
        o_t = i_t + tl.arange(0, BT)
        m_t = o_t < L
        # [BT]
        b_x = tl.load(x + (bos + o_t) * H + i_h, mask=m_t, other=0.0)
        tl.store(y + (bos + o_t) * H + i_h, b_c + tl.cumsum(b_x, 0), mask=m_t)
        b_c += tl.sum(b_x, 0)


def segment_cumsum(x: torch.Tensor, cu_seqlens: torch.Tensor) -> torch.Tensor:
    H = x.shape[1]
    N = cu_seqlens.numel() - 1
    y = torch.empty_like(x)
    seg_cumsum_fwd_kernel[(N, H)](x, y, cu_seqlens, H, BT=16)
    return y
