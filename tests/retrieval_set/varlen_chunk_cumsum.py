"""Chunk-local cumulative sum of gates over packed variable-length sequences (FLA style: cu_seqlens and a chunk index table)."""
import torch
import triton
import triton.language as tl


@triton.jit
def chunk_local_cumsum_kernel(g, out, cu_seqlens, chunk_indices, H, BT: tl.constexpr):
    i_t, i_h = tl.program_id(0), tl.program_id(1)
    i_n, i_t = tl.load(chunk_indices + i_t * 2).to(tl.int32), tl.load(chunk_indices + i_t * 2 + 1).to(tl.int32)
    bos, eos = tl.load(cu_seqlens + i_n).to(tl.int64), tl.load(cu_seqlens + i_n + 1).to(tl.int64)
    T = eos - bos
    o_t = i_t * BT + tl.arange(0, BT)
    m_t = o_t < T
    b_g = tl.load(g + (bos + o_t) * H + i_h, mask=m_t, other=0.0).to(tl.float32)
    tl.store(out + (bos + o_t) * H + i_h, tl.cumsum(b_g, 0), mask=m_t)


def chunk_local_cumsum(g: torch.Tensor, cu_seqlens: torch.Tensor, BT: int = 16) -> torch.Tensor:
    H = g.shape[1]
    lens = cu_seqlens.diff()
    n_chunks = (lens + BT - 1) // BT
    seq = torch.repeat_interleave(torch.arange(lens.numel(), device=g.device), n_chunks)
    first = torch.cumsum(n_chunks, 0) - n_chunks
    idx = torch.arange(seq.numel(), device=g.device) - first[seq]
    chunk_indices = torch.stack([seq, idx], 1).to(torch.int32)
    out = torch.empty_like(g, dtype=torch.float32)
    chunk_local_cumsum_kernel[(chunk_indices.shape[0], H)](g, out, cu_seqlens, chunk_indices, H, BT=BT)
    return out
