"""Plain PyTorch reference: segments of a 16-aligned packed buffer, zero padded to L_MAX."""
import torch


def make_inputs(shape: dict, seed: int, device: str = "cpu") -> dict:
    B, L_MAX = shape["B"], shape["L_MAX"]
    g = torch.Generator().manual_seed(seed)
    lens = torch.randint(1, L_MAX + 1, (B,), generator=g)
    padded = (lens + 15) // 16 * 16  # every segment starts on a multiple of 16
    starts = torch.cumsum(padded, 0) - padded
    x = torch.randn(int(padded.sum()), generator=g)
    return {"x": x.to(device), "starts": starts.to(device), "lens": lens.to(device), "L_MAX": L_MAX}


def reference(x: torch.Tensor, starts: torch.Tensor, lens: torch.Tensor, L_MAX: int) -> torch.Tensor:
    y = torch.zeros(starts.numel(), L_MAX, dtype=x.dtype)
    for b, (s, n) in enumerate(zip(starts.tolist(), lens.tolist())):
        y[b, :n] = x[s : s + n]
    return y
