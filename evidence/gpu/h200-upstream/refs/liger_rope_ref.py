"""Plain PyTorch reference for Liger-Kernel 0.8.5's rope_forward (liger_kernel/ops/rope.py): rotary
position embedding of q [B, HQ, T, D] and k [B, HK, T, D] by cos, sin [T, D], in the kernel's
convention: only the left half of cos and sin is read (the right half of HF's cat(freqs, freqs) is a
copy), x1' = x1 cos - x2 sin, x2' = x2 cos + x1 sin, computed in cos's dtype. Returns q, k and cos,
sin as the launcher does (cos, sin as [1, T, D]). Written for this project."""
import torch


def rope_forward(q, k, cos, sin, position_ids=None, unsqueeze_dim=1, rotary_dim=None):
    assert position_ids is None and rotary_dim is None, "the reference models the full-width, position-free call"
    if cos.ndim == 2:
        cos, sin = cos[None], sin[None]
    half = q.shape[-1] // 2
    c, s = cos[..., :half][:, None], sin[..., :half][:, None]  # [1, 1, T, D/2]

    def rotate(x):
        x1, x2 = x[..., :half].to(c.dtype), x[..., half:].to(c.dtype)
        return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1).to(x.dtype)

    return rotate(q), rotate(k), cos, sin


def bytes_moved(shape, dtype):
    B, HQ, HK, T, D = (shape[n] for n in ("B", "HQ", "HK", "T", "D"))
    s = torch.empty((), dtype=getattr(torch, dtype)).element_size()
    return 2 * B * T * (HQ + HK) * D * s + 2 * T * D * 4  # q and k read and written, cos and sin (fp32) read
