"""Chunk-state propagation whose fp32 dots already run at full IEEE precision."""
import torch
import triton
import triton.language as tl


@triton.jit
def state_chain_fwd_kernel(m, hl, h, NT, K: tl.constexpr, V: tl.constexpr):
    i_bh = tl.program_id(0).to(tl.int64)
    o_k, o_v = tl.arange(0, K), tl.arange(0, V)
    b_h = tl.zeros([K, V], dtype=tl.float32)
    for i_t in range(NT):
        b_m = tl.load(m + ((i_bh * NT + i_t) * K + o_k[:, None]) * K + o_k[None, :]).to(tl.float32)
        b_hl = tl.load(hl + ((i_bh * NT + i_t) * K + o_k[:, None]) * V + o_v[None, :]).to(tl.float32)
        b_h = tl.dot(b_m, b_h, allow_tf32=False) + b_hl
        tl.store(h + ((i_bh * NT + i_t) * K + o_k[:, None]) * V + o_v[None, :], b_h)


def state_chain(m: torch.Tensor, hl: torch.Tensor) -> torch.Tensor:
    BH, NT, K, V = hl.shape
    h = torch.empty_like(hl)
    state_chain_fwd_kernel[(BH,)](m, hl, h, NT, K=K, V=V)
    return h
