"""MoE gate: a Triton softmax over the expert logits, then torch.topk and a renormalisation of the chosen weights."""
import torch
import triton
import triton.language as tl


@triton.jit
def gate_softmax_kernel(logits_ptr, probs_ptr, n_experts, BLOCK_E: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK_E)
    x = tl.load(logits_ptr + row * n_experts + offs, mask=offs < n_experts, other=float("-inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, 0))
    tl.store(probs_ptr + row * n_experts + offs, e / tl.sum(e, 0), mask=offs < n_experts)


def gate(logits: torch.Tensor, top_k: int):
    M, E = logits.shape
    probs = torch.empty(M, E, dtype=torch.float32, device=logits.device)
    gate_softmax_kernel[(M,)](logits, probs, E, BLOCK_E=triton.next_power_of_2(E))
    weights, ids = probs.topk(top_k, dim=-1)
    return weights / weights.sum(-1, keepdim=True), ids
