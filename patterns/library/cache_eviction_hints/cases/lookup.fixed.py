# run: channel_scale x=float32[5000] table=float32[7]
# tests/retrieval_set/streaming_lookup_scale.py: x streamed, the per-channel table re-read by every program
import torch
import triton
import triton.language as tl


@triton.jit
def channel_scale_kernel(x, table, y, N, C: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    o = pid * BLOCK + tl.arange(0, BLOCK)
    m = o < N
    b_x = tl.load(x + o, mask=m, other=0.0, eviction_policy="evict_first")
    b_s = tl.load(table + o % C, mask=m, other=0.0, eviction_policy="evict_last")
    tl.store(y + o, b_x * b_s, mask=m)


def channel_scale(x, table):
    N = x.numel()
    y = torch.empty_like(x)
    channel_scale_kernel[(triton.cdiv(N, 4096),)](x, table, y, N, C=table.numel(), BLOCK=4096)
    return y
