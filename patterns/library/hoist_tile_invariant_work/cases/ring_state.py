# refuse: the loop on line 9 stores to state, which the tl.load on line 11 reads
import triton
import triton.language as tl

@triton.jit
def ring_update_kernel(state, x, T, D: tl.constexpr):
    i_b = tl.program_id(0).to(tl.int64)
    o_d = tl.arange(0, D)
    for i_t in range(0, T):
        # reads the slot the same loop writes: must observe its own stores
        b_s = tl.load(state + i_b * D + o_d)
        b_x = tl.load(x + (i_b * T + i_t) * D + o_d)
        tl.store(state + i_b * D + o_d, b_s * 0.5 + b_x)
