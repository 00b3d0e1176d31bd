# refuse: no fp32 tl.dot at default precision
import triton
import triton.language as tl

@triton.jit
def k(a, b, c, BK: tl.constexpr):
    o = tl.arange(0, BK)
    b_a = tl.load(a + o[:, None] * BK + o[None, :]).to(tl.bfloat16)
    b_b = tl.load(b + o[:, None] * BK + o[None, :]).to(tl.bfloat16)
    tl.store(c + o[:, None] * BK + o[None, :], tl.dot(b_a, b_b))
