# nested loops: a chunked scan whose per-head decay is loaded in the inner loop
import triton
import triton.language as tl


@triton.jit
def chunk_decay_scan_kernel(x, gamma, y, NT, H: tl.constexpr, BT: tl.constexpr, D: tl.constexpr):
    i_nh = tl.program_id(0).to(tl.int64)
    o_d = tl.arange(0, D)
    b_c = tl.zeros([D], dtype=tl.float32)
    # loop-invariant: computed once here, not on every iteration
    b_gamma = tl.load(gamma + i_nh % H)
    b_decay = tl.exp(-b_gamma)
    for i_c in range(0, NT):
        for i_t in range(0, BT):
            b_c = b_c * b_decay + tl.load(x + ((i_nh * NT + i_c) * BT + i_t) * D + o_d)
        tl.store(y + (i_nh * NT + i_c) * D + o_d, b_c)
