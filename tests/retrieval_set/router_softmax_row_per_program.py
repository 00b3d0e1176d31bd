"""MoE router: softmax over the E expert logits of each token, one program per token."""
import torch
import triton
import triton.language as tl


@triton.jit
def router_softmax_kernel(logits, probs, E, BE: tl.constexpr):
    i_t = tl.program_id(0).to(tl.int64)
    o_e = tl.arange(0, BE)
    m_e = o_e < E
    b_l = tl.load(logits + i_t * E + o_e, mask=m_e, other=-float("inf")).to(tl.float32)
    b_p = tl.exp(b_l - tl.max(b_l, 0))
    tl.store(probs + i_t * E + o_e, b_p / tl.sum(b_p, 0), mask=m_e)


def router_softmax(logits: torch.Tensor) -> torch.Tensor:
    T, E = logits.shape
    probs = torch.empty(T, E, device=logits.device, dtype=torch.float32)
    router_softmax_kernel[(T,)](logits, probs, E, BE=triton.next_power_of_2(E), num_warps=1)
    return probs
