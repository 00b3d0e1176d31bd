# refuse: no online-softmax running max
import torch
import triton
import triton.language as tl


@triton.jit
def linear_attn_decode_kernel(q, k, v, o, T, H: tl.constexpr, D: tl.constexpr, BT: tl.constexpr):
    i_b, i_h = tl.program_id(0).to(tl.int64), tl.program_id(1).to(tl.int64)
    o_d = tl.arange(0, D)
    b_q = tl.load(q + (i_b * H + i_h) * D + o_d).to(tl.float32)
    b_z = 0.0
    b_acc = tl.zeros([D], dtype=tl.float32)
    for i_t in range(0, T, BT):
        o_t = i_t + tl.arange(0, BT)
        p_kv = ((i_b * T + o_t[:, None]) * H + i_h) * D + o_d[None, :]
        # elu+1 feature map: a plain sum, no running max
        b_s = tl.where(o_t < T, tl.sum(tl.load(k + p_kv, mask=(o_t < T)[:, None], other=0) * b_q[None, :], 1), 0.0)
        b_p = tl.where(b_s > 0, b_s + 1, tl.exp(b_s))
        b_acc += tl.sum(b_p[:, None] * tl.load(v + p_kv, mask=(o_t < T)[:, None], other=0), 0)
        b_z += tl.sum(tl.where(o_t < T, b_p, 0.0), 0)
    tl.store(o + (i_b * H + i_h) * D + o_d, b_acc / b_z)


def linear_attn_decode(q, k, v):
    B, H, D = q.shape
    o = torch.empty_like(q)
    linear_attn_decode_kernel[(B, H)](q, k, v, o, k.shape[1], H=H, D=D, BT=64)
    return o
