"""Plain PyTorch reference for decode attention, in fp32: one sequence and one head at a time."""
import torch

from patterns.kernels.common import at_least_fp32


def gather_kv(k_cache: torch.Tensor, v_cache: torch.Tensor, i_b: int, seq_len: int, page_table: torch.Tensor | None):
    """The first `seq_len` keys and values of sequence `i_b`: `[seq_len, HK, D]` each."""
    if page_table is None:
        return k_cache[i_b, :seq_len], v_cache[i_b, :seq_len]
    page_size = k_cache.shape[1]
    pos = torch.arange(seq_len, device=k_cache.device)
    pages = page_table[i_b, pos // page_size].long()
    return k_cache[pages, pos % page_size], v_cache[pages, pos % page_size]


def naive_decode_attention(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    seq_lens: torch.Tensor,
    page_table: torch.Tensor | None = None,
    scale: float | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    r"""
    Args:
        q: `[B, HQ, D]`, one query token per sequence.
        k_cache, v_cache: `[B, S, HK, D]` contiguous, or `[P, PAGE, HK, D]` pages when `page_table` is given.
        seq_lens: `[B]` int32, keys attended by each sequence (at least 1).
        page_table: `[B, max_pages]` int32, page `j` of sequence `b` is `page_table[b, j]`.
        scale: defaults to `D ** -0.5`.

    Returns:
        o: `[B, HQ, D]` in `q.dtype`; query head `h` reads key/value head `h // (HQ // HK)`.
        lse: `[B, HQ]` fp32, natural-log sum of exp of the scaled scores.
    """
    B, HQ, D = q.shape
    HK = k_cache.shape[2]
    G = HQ // HK
    if scale is None:
        scale = D ** -0.5
    f32 = at_least_fp32(q).dtype
    o = torch.zeros(B, HQ, D, dtype=f32, device=q.device)
    lse = torch.zeros(B, HQ, dtype=f32, device=q.device)
    for i_b in range(B):
        b_k, b_v = gather_kv(k_cache, v_cache, i_b, int(seq_lens[i_b]), page_table)
        b_k = at_least_fp32(b_k).repeat_interleave(G, dim=1)
        b_v = at_least_fp32(b_v).repeat_interleave(G, dim=1)
        # [HQ, seq_len]
        s = torch.einsum('h d, n h d -> h n', at_least_fp32(q[i_b]) * scale, b_k)
        lse[i_b] = torch.logsumexp(s, dim=-1)
        o[i_b] = torch.einsum('h n, n h d -> h d', s.softmax(-1), b_v)
    return o.to(q.dtype), lse
