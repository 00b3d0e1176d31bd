"""Plain PyTorch reference for the context-parallel state merge, in fp32 (float64 for float64 inputs)."""
import torch

from patterns.kernels.common import at_least_fp32


def naive_cp_state_merge(m: torch.Tensor, h_local: torch.Tensor, h0: torch.Tensor) -> torch.Tensor:
    r"""
    Args:
        m: `[N, H, K, K]` transition of each chunk (the product of its tokens' transitions).
        h_local: `[N, H, K, V]` state each chunk reaches from a zero state.
        h0: `[H, K, V]` state entering the first chunk.

    Returns:
        h: `[N, H, K, V]` fp32, `h[i]` the state after chunk `i`: `h[i] = m[i] @ h[i-1] + h_local[i]`.
    """
    h = at_least_fp32(h0)
    out = torch.zeros(h_local.shape, dtype=h.dtype, device=h_local.device)
    for i in range(m.shape[0]):
        h = at_least_fp32(m[i]) @ h + at_least_fp32(h_local[i])
        out[i] = h
    return out
