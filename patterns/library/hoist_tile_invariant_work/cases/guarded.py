# refuse: line 14: the invariant tl.load sits in an `if` inside the loop
import triton
import triton.language as tl

@triton.jit
def guarded_bias_kernel(x, bias, y, T, HAS_BIAS, D: tl.constexpr):
    i_b = tl.program_id(0).to(tl.int64)
    o_d = tl.arange(0, D)
    p_x = x + i_b * T * D + o_d
    p_y = y + i_b * T * D + o_d
    for _ in range(0, T):
        b_x = tl.load(p_x)
        if HAS_BIAS:
            b_x += tl.load(bias + o_d)
        tl.store(p_y, b_x)
        p_x += D
        p_y += D
