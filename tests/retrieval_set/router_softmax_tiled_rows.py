"""MoE router softmax with BT tokens per program: a [BT, BE] tile reduced along
the experts, the row max subtracted before exp."""
import torch
import triton
import triton.language as tl


@triton.jit
def router_softmax_kernel(logits, probs, T, E, BT: tl.constexpr, BE: tl.constexpr):
    i_b = tl.program_id(0).to(tl.int64)
    o_t = i_b * BT + tl.arange(0, BT)
    o_e = tl.arange(0, BE)
    m = (o_t < T)[:, None] & (o_e < E)[None, :]
    b_l = tl.load(logits + o_t[:, None] * E + o_e[None, :], mask=m, other=-float("inf")).to(tl.float32)
    b_m = tl.max(b_l, 1)
    b_m = tl.where(b_m == -float("inf"), 0.0, b_m)
    b_p = tl.exp(b_l - b_m[:, None])
    b_s = tl.sum(b_p, 1)
    tl.store(probs + o_t[:, None] * E + o_e[None, :], b_p / tl.where(b_s == 0.0, 1.0, b_s)[:, None], mask=m)


def router_softmax(logits: torch.Tensor) -> torch.Tensor:
    T, E = logits.shape
    probs = torch.empty(T, E, device=logits.device, dtype=torch.float32)
    BE = triton.next_power_of_2(E)
    BT = max(1, min(64, 4096 // BE))
    router_softmax_kernel[(triton.cdiv(T, BT),)](logits, probs, T, E, BT=BT, BE=BE, num_warps=4)
    return probs
