"""Per-sequence cumulative sum over a packed batch of variable-length sequences.

x is [total_T, H]: the sequences one after another, sequence b at rows
cu_seqlens[b]:cu_seqlens[b + 1]. The launcher pads them into a [B, T_max, H]
batch (reading the lengths on the host), runs one program per (sequence, head)
over the padded rows and cuts the padding off again.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def seg_cumsum_fwd_kernel(x, y, lens, T, H, BT: tl.constexpr):
    i_b, i_h = tl.program_id(0).to(tl.int64), tl.program_id(1)
    L = tl.load(lens + i_b)
    b_c = tl.zeros([], dtype=tl.float32)
    for i_t in range(0, L, BT):
        o_t = i_t + tl.arange(0, BT)
        m_t = o_t < L
        # [BT]
        b_x = tl.load(x + (i_b * T + o_t) * H + i_h, mask=m_t, other=0.0)
        tl.store(y + (i_b * T + o_t) * H + i_h, b_c + tl.cumsum(b_x, 0), mask=m_t)
        b_c += tl.sum(b_x, 0)


def segment_cumsum(x: torch.Tensor, cu_seqlens: torch.Tensor) -> torch.Tensor:
    H = x.shape[1]
    lens = cu_seqlens.diff()
    # device-to-host copies: the lengths for the split and T_max for the padded shape
    xp = torch.nn.utils.rnn.pad_sequence(list(torch.split(x, lens.tolist())), batch_first=True)
    B, T = xp.shape[0], xp.shape[1]
    yp = torch.empty_like(xp)
    seg_cumsum_fwd_kernel[(B, H)](xp, yp, lens, T, H, BT=16)
    return torch.cat([yp[b, :n] for b, n in enumerate(lens.tolist())])
