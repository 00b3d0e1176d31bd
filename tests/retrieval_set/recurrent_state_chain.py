"""Chunked linear-attention state passing: h <- decay * h + k^T v per chunk, with fp32 tl.dot."""
import torch
import triton
import triton.language as tl


@triton.jit
def state_passing_fwd_kernel(k, v, h, NT, K: tl.constexpr, V: tl.constexpr, BT: tl.constexpr):
    i_bh = tl.program_id(0).to(tl.int64)
    o_k, o_v, o_t = tl.arange(0, K), tl.arange(0, V), tl.arange(0, BT)
    b_h = tl.zeros([K, V], dtype=tl.float32)
    for i_t in range(NT):
        b_k = tl.load(k + ((i_bh * NT + i_t) * BT + o_t[:, None]) * K + o_k[None, :]).to(tl.float32)
        b_v = tl.load(v + ((i_bh * NT + i_t) * BT + o_t[:, None]) * V + o_v[None, :]).to(tl.float32)
        b_h = 0.9 * b_h + tl.dot(tl.trans(b_k), b_v)
        tl.store(h + ((i_bh * NT + i_t) * K + o_k[:, None]) * V + o_v[None, :], b_h)


def state_passing(k: torch.Tensor, v: torch.Tensor, chunk: int = 64) -> torch.Tensor:
    BH, T, K = k.shape
    V = v.shape[-1]
    NT = T // chunk
    h = torch.empty(BH, NT, K, V, device=k.device, dtype=torch.float32)
    state_passing_fwd_kernel[(BH,)](k, v, h, NT, K=K, V=V, BT=chunk)
    return h
