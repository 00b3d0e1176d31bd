# A kernel defined through a wrapper call instead of a decorator.
import triton
import triton.language as tl

_SIZES = ["n"]


# a plain function, made a kernel by the assignment below
def _copy(x, y, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y + offs, tl.load(x + offs, mask=offs < n), mask=offs < n)


copy_kernel = triton.jit(do_not_specialize=_SIZES)(_copy)


def copy(x, y, n):
    copy_kernel[(triton.cdiv(n, 64),)](x, y, n, BLOCK=64)
