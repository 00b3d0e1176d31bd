# Negative case: a plain kernel with none of the hardened features.
import triton
import triton.language as tl


@triton.jit
def scale_kernel(x, y, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(y + offs, tl.load(x + offs, mask=m) * 2.0, mask=m)


def scale(x, y, n):
    scale_kernel[(triton.cdiv(n, 128),)](x, y, n, BLOCK=128)
