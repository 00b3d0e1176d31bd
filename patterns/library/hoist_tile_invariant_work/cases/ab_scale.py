# refuse: line 13: b_s is assigned 2× in the kernel
import triton
import triton.language as tl

@triton.jit
def scaled_scan_kernel(x, s, y, T, D: tl.constexpr):
    i_b = tl.program_id(0).to(tl.int64)
    o_d = tl.arange(0, D)
    b_c = tl.zeros([D], dtype=tl.float32)
    for i_t in range(0, T):
        b_x = tl.load(x + (i_b * T + i_t) * D + o_d)
        # the loop rescales its own copy: b_s is not invariant once assigned twice
        b_s = tl.load(s + i_b)
        b_s = b_s * tl.exp(b_x)
        b_c += b_s
        tl.store(y + (i_b * T + i_t) * D + o_d, b_c)
