"""Cross-entropy forward over a large vocabulary, one program per token: a max pass, then an exp-sum pass.

Each row of logits (V = 128k entries for a Llama-3 vocabulary) is read from HBM
twice: once for its max, once for sum(exp(x - max)). loss = logsumexp(x) - x[target].
"""
import torch
import triton
import triton.language as tl


@triton.jit
def cross_entropy_fwd_kernel(logits, target, loss, V, BV: tl.constexpr):
    i_m = tl.program_id(0).to(tl.int64)
    p_x = logits + i_m * V
    # [BV]
    b_m = tl.full([BV], float("-inf"), dtype=tl.float32)
    for i_v in range(0, V, BV):
        o_v = i_v + tl.arange(0, BV)
        b_x = tl.load(p_x + o_v, mask=o_v < V, other=float("-inf")).to(tl.float32)
        b_m = tl.maximum(b_m, b_x)
    b_max = tl.max(b_m, axis=0)
    b_s = tl.zeros([BV], dtype=tl.float32)
    for i_v in range(0, V, BV):
        o_v = i_v + tl.arange(0, BV)
        b_x = tl.load(p_x + o_v, mask=o_v < V, other=float("-inf")).to(tl.float32)
        b_s += tl.exp(b_x - b_max)
    b_lse = b_max + tl.log(tl.sum(b_s, axis=0))
    b_t = tl.load(target + i_m)
    b_xt = tl.load(p_x + b_t).to(tl.float32)
    tl.store(loss + i_m, b_lse - b_xt)


def cross_entropy(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    M, V = logits.shape
    loss = torch.empty(M, device=logits.device, dtype=torch.float32)
    cross_entropy_fwd_kernel[(M,)](logits, target, loss, V, BV=4096)
    return loss
