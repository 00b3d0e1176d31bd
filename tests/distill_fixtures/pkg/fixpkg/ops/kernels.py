# Positive cases for the Python hardening: cross-module helper, aliases,
# descriptor parameters, wrapper decorators, do_not_specialize, static_range, heuristics.
import triton
import triton.language as tl

from fixpkg.utils.op import exp, gather
from ..utils.op import make_tensor_descriptor, my_autotune


@triton.jit(do_not_specialize=["T"])
def decay_kernel(x, y, T, BT: tl.constexpr):
    i_t = tl.program_id(0)
    o_t = i_t * BT + tl.arange(0, BT)
    b_x = tl.load(x + o_t, mask=o_t < T)
    tl.store(y + o_t, exp(b_x), mask=o_t < T)


@triton.heuristics({"EVEN": lambda args: args["T"] % args["BT"] == 0})
@triton.jit
def gather_kernel(x, idx, y, T, BT: tl.constexpr, EVEN: tl.constexpr):
    i_t = tl.program_id(0)
    o_t = i_t * BT + tl.arange(0, BT)
    b_x = tl.load(x + o_t)
    b_i = tl.load(idx + o_t)
    for i in tl.static_range(2):
        b_x = gather(b_x, b_i, 0)
    tl.store(y + o_t, b_x)


@my_autotune(configs=[triton.Config({"BT": 16}), triton.Config({"BT": 32})], key=["T"])
@triton.jit
def desc_param_kernel(a_desc, b_desc, T, BT: tl.constexpr):
    i_t = tl.program_id(0)
    b_a = a_desc.load([i_t * BT, 0])
    b_desc.store([i_t * BT, 0], b_a)


@triton.jit
def desc_local_kernel(a, b, T, BT: tl.constexpr):
    i_t = tl.program_id(0)
    desc = make_tensor_descriptor(a, [T, 16], [16, 1], [BT, 16])
    b_a = desc.load([i_t * BT, 0])
    tl.store(b + i_t * BT + tl.arange(0, BT)[:, None] * 16 + tl.arange(0, 16)[None, :], b_a)
