# refuse: line 26: after the KV loop only assignments and tl.store calls can move into the merge
# an output written under a branch after the loop: the merge copies straight-line code only
import torch
import triton
import triton.language as tl


@triton.jit
def decode_fwd_kernel(q, k, v, o, lse, scale, T, H: tl.constexpr, D: tl.constexpr, BT: tl.constexpr):
    i_b, i_h = tl.program_id(0).to(tl.int64), tl.program_id(1).to(tl.int64)
    o_d = tl.arange(0, D)
    b_q = tl.load(q + (i_b * H + i_h) * D + o_d).to(tl.float32) * scale
    b_m = float("-inf")
    b_l = 0.0
    b_acc = tl.zeros([D], dtype=tl.float32)
    for i_t in range(0, T, BT):
        o_t = i_t + tl.arange(0, BT)
        p_kv = ((i_b * T + o_t[:, None]) * H + i_h) * D + o_d[None, :]
        b_s = tl.where(o_t < T, tl.sum(tl.load(k + p_kv, mask=(o_t < T)[:, None], other=0) * b_q[None, :], 1), float("-inf"))
        b_m_new = tl.maximum(b_m, tl.max(b_s, 0))
        b_p = tl.exp(b_s - b_m_new)
        b_alpha = tl.exp(b_m - b_m_new)
        b_acc = b_acc * b_alpha + tl.sum(b_p[:, None] * tl.load(v + p_kv, mask=(o_t < T)[:, None], other=0), 0)
        b_l = b_l * b_alpha + tl.sum(b_p, 0)
        b_m = b_m_new
    if b_l > 0:
        tl.store(o + (i_b * H + i_h) * D + o_d, b_acc / b_l)
    # the prefix/suffix merge downstream needs the log-sum-exp too
    tl.store(lse + i_b * H + i_h, b_m + tl.log(b_l))


def decode(q, k, v):
    B, H, D = q.shape
    T = k.shape[1]
    o = torch.empty_like(q)
    lse = torch.empty(B, H, dtype=torch.float32, device=q.device)
    decode_fwd_kernel[(B, H)](q, k, v, o, lse, D**-0.5, T, H=H, D=D, BT=64)
    return o, lse
