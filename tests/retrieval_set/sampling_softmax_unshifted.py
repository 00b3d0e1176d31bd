"""Sampling probabilities: softmax(logits / temperature) over a vocabulary slice,
exponentiating the scaled logits directly."""
import torch
import triton
import triton.language as tl


@triton.jit
def temperature_softmax_kernel(logits, probs, inv_temp, V, BV: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BV)
    mask = cols < V
    z = tl.load(logits + row * V + cols, mask=mask, other=-float("inf")).to(tl.float32) * inv_temp
    e = tl.exp(z)
    tl.store(probs + row * V + cols, e / tl.sum(e, axis=0), mask=mask)


def temperature_softmax(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    B, V = logits.shape
    probs = torch.empty(B, V, device=logits.device, dtype=torch.float32)
    temperature_softmax_kernel[(B,)](logits, probs, 1.0 / temperature, V, BV=triton.next_power_of_2(V), num_warps=4)
    return probs
