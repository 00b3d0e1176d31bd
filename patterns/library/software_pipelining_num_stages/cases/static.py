# refuse: the only loop that loads \(line 13\) is tl.static_range: unrolled, nothing to pipeline
# a short unrolled loop over the four gates of an LSTM cell: nothing to pipeline
import torch
import triton
import triton.language as tl


@triton.jit
def lstm_gates_kernel(x, w, b, y, D: tl.constexpr):
    i_b = tl.program_id(0)
    o_d = tl.arange(0, D)
    b_x = tl.load(x + i_b * D + o_d)
    for i_g in tl.static_range(4):
        b_w = tl.load(w + (i_g * D + o_d[:, None]) * D + o_d[None, :])
        b_g = tl.sum(b_w * b_x[None, :], 1) + tl.load(b + i_g * D + o_d)
        tl.store(y + (i_b * 4 + i_g) * D + o_d, b_g)


def lstm_gates(x, w, b):
    B, D = x.shape
    y = torch.empty(B, 4, D, device=x.device, dtype=x.dtype)
    lstm_gates_kernel[(B,)](x, w, b, y, D=D)
    return y
