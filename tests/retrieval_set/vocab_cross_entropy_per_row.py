"""Cross-entropy over a large vocabulary at decode batch sizes: one program per row walks the row with an online log-sum-exp."""
import torch
import triton
import triton.language as tl


@triton.jit
def cross_entropy_row_kernel(logits, labels, loss, V, BLOCK_V: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    m = tl.full([], float("-inf"), dtype=tl.float32)
    s = tl.zeros([], dtype=tl.float32)
    for start in range(0, V, BLOCK_V):
        offs = start + tl.arange(0, BLOCK_V)
        x = tl.load(logits + row * V + offs, mask=offs < V, other=float("-inf")).to(tl.float32)
        m, m_old = tl.maximum(m, tl.max(x, 0)), m
        s = s * tl.exp(m_old - m) + tl.sum(tl.exp(x - m), 0)
    target = tl.load(logits + row * V + tl.load(labels + row)).to(tl.float32)
    tl.store(loss + row, m + tl.log(s) - target)


def cross_entropy(logits, labels):
    M, V = logits.shape
    loss = torch.empty(M, dtype=torch.float32, device=logits.device)
    cross_entropy_row_kernel[(M,)](logits, labels, loss, V, BLOCK_V=512)
    return loss
