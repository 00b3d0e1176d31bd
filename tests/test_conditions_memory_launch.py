"""Conditions of the memory/layout, reduction, launch and numerics patterns (issue #14)
on small kernels that reproduce constructs found on the real-kernel corpus
(python -m patterns.retriever.corpus): each case is a false positive or a miss
that a first version of the condition had there.
"""
from __future__ import annotations

import pytest

from patterns.core.facts import extract_source
from patterns.core.library import load_library
from patterns.core.predicates import Subject, evaluate

HEADER = "import torch\nimport triton\nimport triton.language as tl\n"


@pytest.fixture(scope="module")
def library():
    return {e.id: e.pattern for e in load_library()}


def subject(src: str, kernel: str) -> Subject:
    facts = extract_source(HEADER + src, "fixture.py")
    k = facts.kernel(kernel)
    assert k is not None, [x.name for x in facts.kernels]
    return Subject(facts, k)


def applies(library, pid: str, s: Subject) -> bool:
    return evaluate(library[pid].applies_when.conditions, s).ok


def present(library, pid: str, s: Subject) -> bool:
    return evaluate(library[pid].present_when, s).ok


# -- block_reduce_before_atomic: a counter of 1 is not a block to reduce (flashinfer's routing counts)

COUNTER = '''
@triton.jit
def count_kernel(counter, flags, n, BLOCK: tl.constexpr):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    f = tl.load(flags + o, mask=o < n, other=0)
    slot = tl.atomic_add(counter, 1, sem="acq_rel")
    tl.store(flags + o, f + slot, mask=o < n)
'''

LANE_SUM = '''
@triton.jit
def loss_kernel(x, out, n, BLOCK: tl.constexpr):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(x + o, mask=o < n, other=0.0)
    tl.atomic_add(out + o * 0, v * v, mask=o < n)
'''


def test_atomic_of_a_scalar_count_is_not_a_block(library):
    assert not applies(library, "block_reduce_before_atomic", subject(COUNTER, "count_kernel"))
    assert applies(library, "block_reduce_before_atomic", subject(LANE_SUM, "loss_kernel"))


# -- zeros_to_empty_outputs: a zeros buffer two kernels write in parts (FLA's chunk_kkt intra kernels)

TWO_WRITERS = '''
@triton.jit
def lower_kernel(a, T, BT: tl.constexpr):
    o = tl.arange(0, BT)
    tl.store(a + tl.program_id(0) * BT + o, o * 1.0)


@triton.jit
def diag_kernel(a, T, BT: tl.constexpr):
    o = tl.arange(0, BT)
    tl.store(a + tl.program_id(0) * BT + o, o * 2.0)


def build(T):
    a = torch.zeros(T, 16)
    lower_kernel[(T,)](a, T, BT=16)
    diag_kernel[(T,)](a, T, BT=16)
    return a
'''


def test_zeros_shared_by_two_launches_keeps_its_fill(library):
    assert not applies(library, "zeros_to_empty_outputs", subject(TWO_WRITERS, "lower_kernel"))


# -- fold_host_casts_into_kernel: `.float()` inside an expression is no upcast copy (a scale from amax)

SCALE = '''
@triton.jit
def quant_kernel(x, y, s, N, BN: tl.constexpr):
    o = tl.arange(0, BN)
    b_x = tl.load(x + tl.program_id(0) * N + o, mask=o < N, other=0.0).to(tl.float32)
    tl.store(y + tl.program_id(0) * N + o, b_x / tl.load(s), mask=o < N)


def quant(x):
    M, N = x.shape
    y = torch.empty_like(x)
    s = (x.abs().amax().float() / 127.0).reshape(1)
    quant_kernel[(M,)](x, y, s, N, BN=triton.next_power_of_2(N))
    return y
'''


def test_cast_inside_a_scale_expression_is_not_a_host_upcast(library):
    assert not applies(library, "fold_host_casts_into_kernel", subject(SCALE, "quant_kernel"))
    upcast = SCALE.replace("quant_kernel[(M,)](x, y, s", "xf = x.float()\n    quant_kernel[(M,)](xf, y, s")
    assert applies(library, "fold_host_casts_into_kernel", subject(upcast, "quant_kernel"))


# -- row_chunk_loop: a GEMM's K loop is no chunked row

GEMM = '''
@triton.jit
def mm_kernel(a, b, c, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    o_m = tl.program_id(0) * BM + tl.arange(0, BM)
    o_n = tl.arange(0, BN)
    acc = tl.zeros([BM, BN], dtype=tl.float32)
    for k in range(0, K, BK):
        o_k = k + tl.arange(0, BK)
        acc += tl.dot(tl.load(a + o_m[:, None] * K + o_k[None, :]), tl.load(b + o_k[:, None] * N + o_n[None, :]))
    tl.store(c + o_m[:, None] * N + o_n[None, :], acc)
'''


def test_gemm_k_loop_is_not_a_chunked_row(library):
    assert not present(library, "row_chunk_loop", subject(GEMM, "mm_kernel"))


# -- alignment_contiguity_hints: an offset scaled by a stride keeps its divisibility (FLA's bos * H * K)

SCALED = '''
@triton.jit
def varlen_kernel(x, y, cu, D: tl.constexpr):
    bos = tl.load(cu + tl.program_id(0))
    o = tl.arange(0, D)
    tl.store(y + tl.program_id(0) * D + o, tl.load(x + bos * D + o))
'''


def test_offset_scaled_by_a_constexpr_needs_no_hint(library):
    s = subject(SCALED, "varlen_kernel")
    assert not applies(library, "alignment_contiguity_hints", s)
    unscaled = SCALED.replace("tl.load(x + bos * D + o)", "tl.load(x + bos + o)")
    assert applies(library, "alignment_contiguity_hints", subject(unscaled, "varlen_kernel"))


# -- cumsum_associative_scan: a row loop that stores per row is no serial prefix sum (Liger's norm backward)

ROW_LOOP = '''
@triton.jit
def norm_bwd_kernel(dy, x, dx, dw, rows, N, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for r in range(rows):
        g = tl.load(dy + r * N + cols, mask=cols < N, other=0.0)
        acc += g * tl.load(x + r * N + cols, mask=cols < N, other=0.0)
        tl.store(dx + r * N + cols, acc, mask=cols < N)
    tl.store(dw + cols, acc, mask=cols < N)
'''

DECAY = '''
@triton.jit
def hgrn_kernel(x, g, o, T, D: tl.constexpr):
    o_d = tl.arange(0, D)
    h = tl.zeros([D], dtype=tl.float32)
    for t in range(T):
        h = tl.load(g + t) * h + tl.load(x + t)
        tl.store(o + t, h)
'''


def test_row_loops_and_decayed_states_are_not_prefix_sums(library):
    assert not applies(library, "cumsum_associative_scan", subject(ROW_LOOP, "norm_bwd_kernel"))
    assert not applies(library, "cumsum_associative_scan", subject(DECAY, "hgrn_kernel"))


# -- max_shifted_exp: exp of a log-decay is no softmax (FLA's gated kernels)

GATE_EXP = '''
@triton.jit
def decay_kernel(g, y, T, BT: tl.constexpr):
    o = tl.arange(0, BT)
    b_g = tl.load(g + o, mask=o < T, other=0.0)
    b_d = tl.exp(b_g)
    tl.store(y + o, b_d * tl.sum(b_d, 0), mask=o < T)
'''


def test_exp_of_a_gate_is_not_a_softmax(library):
    assert not applies(library, "max_shifted_exp", subject(GATE_EXP, "decay_kernel"))


# -- even_k_unmasked_loads: a constexpr K already tells the compiler there is no tail

CONST_K = '''
@triton.jit
def gemv_kernel(w, x, y, N, K: tl.constexpr, BK: tl.constexpr):
    o_n = tl.program_id(0)
    acc = tl.zeros([BK], dtype=tl.float32)
    for i in range(0, K, BK):
        o_k = i + tl.arange(0, BK)
        acc += tl.load(w + o_n * K + o_k, mask=o_k < K, other=0.0) * tl.load(x + o_k, mask=o_k < K, other=0.0)
    tl.store(y + o_n, tl.sum(acc, 0))
'''


def test_constexpr_k_needs_no_even_k(library):
    assert not applies(library, "even_k_unmasked_loads", subject(CONST_K, "gemv_kernel"))
    runtime = CONST_K.replace("K: tl.constexpr", "K")
    assert applies(library, "even_k_unmasked_loads", subject(runtime, "gemv_kernel"))
