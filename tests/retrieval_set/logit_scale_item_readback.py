"""Logit soft-capping with a learned cap: y = cap * tanh(x / cap), the cap read
back from its device tensor for every launch."""
import torch
import triton
import triton.language as tl


@triton.jit
def softcap_kernel(x, y, cap, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    v = tl.load(x + offs, mask=mask, other=0.0).to(tl.float32)
    z = 2.0 * v / cap
    tl.store(y + offs, cap * (1.0 - 2.0 / (tl.exp(z) + 1.0)), mask=mask)


def softcap(x: torch.Tensor, cap: torch.Tensor) -> torch.Tensor:
    y = torch.empty_like(x)
    n = x.numel()
    softcap_kernel[(triton.cdiv(n, 1024),)](x, y, cap.item(), n, BLOCK=1024)
    return y
