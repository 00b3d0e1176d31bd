# refuse: embedding_kernel has no tile load to classify \(line 14 gathers through i_tok, read from memory\)
# rows gathered through token ids: which rows are shared depends on the ids, not on the code
import torch
import triton
import triton.language as tl


@triton.jit
def embedding_kernel(ids, table, out, D: tl.constexpr, BD: tl.constexpr):
    i_t = tl.program_id(0).to(tl.int64)
    o_d = tl.arange(0, BD)
    m_d = o_d < D
    i_tok = tl.load(ids + i_t)
    b_e = tl.load(table + i_tok * D + o_d, mask=m_d, other=0.0)
    tl.store(out + i_t * D + o_d, b_e, mask=m_d)


def embedding(ids, table):
    T = ids.numel()
    D = table.shape[1]
    out = torch.empty(T, D, device=table.device, dtype=table.dtype)
    embedding_kernel[(T,)](ids, table, out, D=D, BD=triton.next_power_of_2(D))
    return out
