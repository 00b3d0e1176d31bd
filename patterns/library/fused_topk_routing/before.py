"""MoE router: softmax over E expert logits per token, the top-k experts, their weights renormalised.

A kernel writes the [M, E] probabilities; torch.topk and a renormalisation
(three more kernels and two more [M, E]-sized passes) pick the experts.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def router_softmax_fwd_kernel(logits, probs, E, BE: tl.constexpr):
    i_m = tl.program_id(0).to(tl.int64)
    o_e = tl.arange(0, BE)
    m_e = o_e < E
    b_x = tl.load(logits + i_m * E + o_e, mask=m_e, other=float('-inf')).to(tl.float32)
    b_p = tl.exp(b_x - tl.max(b_x, 0))
    tl.store(probs + i_m * E + o_e, b_p / tl.sum(b_p, 0), mask=m_e)


def route(logits: torch.Tensor, top_k: int) -> tuple[torch.Tensor, torch.Tensor]:
    M, E = logits.shape
    probs = torch.empty(M, E, dtype=torch.float32, device=logits.device)
    router_softmax_fwd_kernel[(M,)](logits, probs, E, BE=triton.next_power_of_2(E))
    w, ids = torch.topk(probs, top_k, dim=-1)
    return w / w.sum(-1, keepdim=True), ids.to(torch.int32)
