# refuse: line 15: the invariant tl.load is part of `b_gk = .*`, which also reads b_g
import triton
import triton.language as tl

@triton.jit
def gate_recurrent_kernel(g, A_log, o, T, H: tl.constexpr, K: tl.constexpr):
    i_nh = tl.program_id(0).to(tl.int64)
    i_h = i_nh % H
    o_k = tl.arange(0, K)
    p_g = g + i_nh * T * K + o_k
    b_h = tl.zeros([K], dtype=tl.float32)
    for _ in range(0, T):
        b_g = tl.load(p_g).to(tl.float32)
        # FLA writes the gate in one line: the invariant A_log load is part of a varying statement
        b_gk = -tl.exp(tl.load(A_log + i_h)) * tl.log(1 + tl.exp(b_g))
        b_h = b_h * tl.exp(b_gk) + 1
        p_g += K
    tl.store(o + i_nh * K + o_k, b_h)
