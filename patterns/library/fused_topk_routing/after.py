"""MoE router: softmax over E expert logits per token, the top-k experts, their weights renormalised.

One program per token keeps the E logits in registers and selects the top k by
repeated argmax, masking each winner to -inf; the renormalised weight of an
expert is exp(x - x_max) over the sum of the k selected exps, so the full
softmax is never written. Only [M, k] weights and ids leave the kernel.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def router_topk_fwd_kernel(logits, weights, ids, E, TOP_K: tl.constexpr, BE: tl.constexpr):
    i_m = tl.program_id(0).to(tl.int64)
    o_e = tl.arange(0, BE)
    o_k = tl.arange(0, TOP_K)
    b_x = tl.load(logits + i_m * E + o_e, mask=o_e < E, other=float('-inf')).to(tl.float32)
    b_max = tl.max(b_x, 0)
    b_w = tl.zeros([TOP_K], dtype=tl.float32)
    b_i = tl.zeros([TOP_K], dtype=tl.int32)
    for i_k in tl.static_range(TOP_K):
        b_best = tl.argmax(b_x, 0)
        b_w = tl.where(o_k == i_k, tl.exp(tl.max(b_x, 0) - b_max), b_w)
        b_i = tl.where(o_k == i_k, b_best.to(tl.int32), b_i)
        b_x = tl.where(o_e == b_best, float('-inf'), b_x)
    # softmax then renormalising over the selected k is exp(x - max) / Σ_selected exp(x - max)
    tl.store(weights + i_m * TOP_K + o_k, b_w / tl.sum(b_w, 0))
    tl.store(ids + i_m * TOP_K + o_k, b_i)


def route(logits: torch.Tensor, top_k: int) -> tuple[torch.Tensor, torch.Tensor]:
    M, E = logits.shape
    weights = torch.empty(M, top_k, dtype=torch.float32, device=logits.device)
    ids = torch.empty(M, top_k, dtype=torch.int32, device=logits.device)
    router_topk_fwd_kernel[(M,)](logits, weights, ids, E, TOP_K=top_k, BE=triton.next_power_of_2(E))
    return weights, ids
