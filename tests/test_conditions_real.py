"""Pattern conditions on small kernels that reproduce real published ones.

Each fixture is written by the project and mirrors a construct found on the
real-kernel corpus (python -m patterns.retriever.corpus): an inline Welford
update, a row read three times, tuning by another autotuner or a config table,
tl.dot_scaled, a while-loop persistent kernel, a decode attention that is no
linear recurrence, a hoisted constant, a host-made tensor descriptor. Every
fix of a condition is checked here and, on the whole corpus, by the corpus run.
"""
from __future__ import annotations

import pytest

from patterns.core.facts import extract_source
from patterns.core.library import load_library
from patterns.core.predicates import Subject, evaluate, readable
from patterns.core.schema import Condition

HEADER = "import torch\nimport triton\nimport triton.language as tl\n"


@pytest.fixture(scope="module")
def library():
    return {e.id: e.pattern for e in load_library()}


def subject(src: str, kernel: str) -> Subject:
    facts = extract_source(HEADER + src, "fixture.py")
    k = facts.kernel(kernel)
    assert k is not None, [x.name for x in facts.kernels]
    return Subject(facts, k)


def present(library, pid: str, s: Subject) -> bool:
    return evaluate(library[pid].present_when, s).ok


def applies(library, pid: str, s: Subject) -> bool:
    cond = library[pid].applies_when.conditions
    return evaluate(cond, s).ok


# -- Welford written inline (flag_gems var_mean style) --------------------------------

WELFORD_INLINE = '''
@triton.jit
def var_mean_kernel(X, Var, Mean, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)[:, None]
    X = X + rows * N
    _mean = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    _acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    _count = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for off in range(0, N, BLOCK_N):
        cols = off + tl.arange(0, BLOCK_N)[None, :]
        mask = (rows < M) & (cols < N)
        x = tl.load(X + cols, mask, other=0.0).to(tl.float32)
        count = _count + mask
        cur_mean = (_mean * _count + x) / tl.maximum(count, 1)
        _acc += (x - cur_mean) * (x - _mean) * mask
        _mean = cur_mean
        _count = count
    tl.store(Mean + rows, tl.sum(_mean, axis=1)[:, None])
    tl.store(Var + rows, tl.sum(_acc, axis=1)[:, None] / N)
'''

RAW_MOMENTS = '''
@triton.jit
def moments_kernel(X, Acc, Mean, N, BLOCK_N: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = offs < N
    x = tl.load(X + offs, mask, other=0.0).to(tl.float32)
    count = tl.sum(mask.to(tl.float32))
    mean = tl.sum(x) / count
    acc = tl.sum(x * x) - count * mean * mean
    tl.store(Mean + pid, mean)
    tl.store(Acc + pid, acc)
'''


def test_inline_welford_update_is_recognised(library):
    s = subject(WELFORD_INLINE, "var_mean_kernel")
    assert present(library, "welford_reduction", s)
    assert not applies(library, "welford_reduction", s)


def test_raw_moments_without_sqrt_call_for_welford(library):
    # the variance itself is the output (no rsqrt after it): E[x^2] - E[x]^2 still cancels
    s = subject(RAW_MOMENTS, "moments_kernel")
    assert not present(library, "welford_reduction", s)
    assert applies(library, "welford_reduction", s)


# -- a row read three times is not single-pass ----------------------------------------

THREE_READS = '''
@triton.jit
def layernorm_three_reads(X, Y, N, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x1 = tl.load(X + row * N + cols, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x1, axis=0) / N
    x2 = tl.load(X + row * N + cols, mask=mask, other=0.0).to(tl.float32)
    d = tl.where(mask, x2 - mean, 0.0)
    var = tl.sum(d * d, axis=0) / N
    x3 = tl.load(X + row * N + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(Y + row * N + cols, (x3 - mean) * tl.rsqrt(var + eps), mask=mask)
'''

ONE_READ = '''
@triton.jit
def layernorm_one_read(X, Y, N, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(X + row * N + cols, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / N
    d = tl.where(mask, x - mean, 0.0)
    var = tl.sum(d * d, axis=0) / N
    tl.store(Y + row * N + cols, d * tl.rsqrt(var + eps), mask=mask)
'''


def test_row_read_three_times_is_not_single_pass(library):
    verdict = evaluate(library["single_pass_reduction"].present_when, subject(THREE_READS, "layernorm_three_reads"))
    assert not verdict.ok
    # each statistic reduces its own read of the row (x1, then x2 around the mean)
    assert verdict.reasons == ["no pass with 2 reductions of the same loaded value"]
    # without of_row the reductions share x1 (the mean of the first read enters the second): the re-reads say no
    broad = evaluate(Condition.model_validate({"reductions_share_load": {"min_count": 2}}), subject(THREE_READS, "layernorm_three_reads"))
    assert not broad.ok and "read 3 times" in broad.reasons[0]
    assert present(library, "single_pass_reduction", subject(ONE_READ, "layernorm_one_read"))


SCORES = '''
@triton.jit
def decode_scores(Q, K, O, N, BLOCK: tl.constexpr, D: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    d = tl.arange(0, D)
    q = tl.load(Q + row * D + d)
    k = tl.load(K + cols[:, None] * D + d[None, :])
    s = tl.sum(q[None, :] * k, 1)
    m = tl.max(s, 0)
    p = tl.exp(s - m)
    tl.store(O + row * BLOCK + cols, p / tl.sum(p, 0))
'''

RECURRENT = '''
@triton.jit
def recurrent_step(Q, K, V, O, T, D: tl.constexpr):
    i = tl.program_id(0)
    d = tl.arange(0, D)
    h = tl.zeros([D, D], dtype=tl.float32)
    for t in range(T):
        q = tl.load(Q + (i * T + t) * D + d)
        k = tl.load(K + (i * T + t) * D + d)
        v = tl.load(V + (i * T + t) * D + d)
        v_new = v - tl.sum(h * k[:, None], 0)
        h += k[:, None] * v_new[None, :]
        tl.store(O + (i * T + t) * D + d, tl.sum(h * q[:, None], 0))
'''


def test_reductions_of_scores_or_of_a_carried_state_are_not_row_statistics(library):
    """A softmax over q·k scores reduces a dot's result, a recurrence reduces products with its state:
    both derive their reductions from one load (reductions_share_load without of_row holds), neither
    takes statistics of the row it read."""
    broad = Condition.model_validate({"reductions_share_load": {"min_count": 2}})
    for code, name in ((SCORES, "decode_scores"), (RECURRENT, "recurrent_step")):
        assert evaluate(broad, subject(code, name)).ok, name
        assert not present(library, "single_pass_reduction", subject(code, name)), name


THREE_LOOPS = '''
@triton.jit
def kl_div_kernel(X, Q, loss, dX, n_cols, T, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    X += row * n_cols
    Q += row * n_cols
    m = float("-inf")
    for i in range(0, n_cols, BLOCK):
        offs = i + tl.arange(0, BLOCK)
        mask = offs < n_cols
        x = tl.load(X + offs, mask=mask, other=0.0).to(tl.float32)
        x = tl.where(mask, x / T, float("-inf"))
        m = tl.maximum(m, tl.max(x, axis=0))
    a1 = 0.0
    a2 = 0.0
    s = 0.0
    for i in range(0, n_cols, BLOCK):
        offs = i + tl.arange(0, BLOCK)
        mask = offs < n_cols
        x = tl.load(X + offs, mask=mask, other=0.0).to(tl.float32)
        x = tl.where(mask, x / T, float("-inf"))
        q = tl.load(Q + offs, mask=mask, other=0.0).to(tl.float32)
        s += tl.sum(tl.exp(x - m), axis=0)
        a1 += tl.sum(q * tl.log(q), axis=0)
        a2 += tl.sum(q, axis=0)
    lse = m + tl.log(s)
    tl.store(loss + row, a1 + lse * a2)
    for i in range(0, n_cols, BLOCK):
        offs = i + tl.arange(0, BLOCK)
        mask = offs < n_cols
        x = tl.load(X + offs, mask=mask, other=0.0).to(tl.float32)
        tl.store(dX + row * n_cols + offs, tl.exp(x / T - lse), mask=mask)
'''


def test_a_row_read_in_three_loops_is_not_single_pass(library):
    # liger's fused_linear_kl_div: two reductions of Q share its one read, but the logits row is read by
    # each of three loops (max, denominator, gradient); it was reported as already single-pass
    verdict = evaluate(library["single_pass_reduction"].present_when, subject(THREE_LOOPS, "kl_div_kernel"))
    assert not verdict.ok
    assert verdict.reasons == ["the row `X + offs` is read 3 times (lines 14, 23, 34)"]


# -- tuning other than @triton.autotune -----------------------------------------------

GEMM_BODY = '''(a, b, c, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        x = tl.load(a + rm[:, None] * K + (k + rk)[None, :])
        w = tl.load(b + (k + rk)[:, None] * N + rn[None, :])
        acc += tl.dot(x, w)
    tl.store(c + rm[:, None] * N + rn[None, :], acc)
'''

LIBTUNER = "from some_lib.utils import libtuner\n\n@libtuner(configs=[], key=['M', 'N', 'K'])\n@triton.jit\ndef gemm" + GEMM_BODY

WRAPPED = "@triton.jit\ndef gemm" + GEMM_BODY + '''

gemm_tuned = triton.autotune(configs=[triton.Config({"BLOCK_M": 64}), triton.Config({"BLOCK_M": 128})], key=["M"])(gemm)
'''

CONFIG_TABLE = "import json\n\n@triton.jit\ndef gemm" + GEMM_BODY + '''

def launch(a, b, c):
    M, K = a.shape
    N = b.shape[1]
    config = json.load(open("configs/N=4096,K=4096,device_name=H200.json"))[str(M)]
    grid = (triton.cdiv(M, config["BLOCK_M"]), triton.cdiv(N, config["BLOCK_N"]))
    gemm[grid](a, b, c, M, N, K, **config)
'''

TABLE_FUNCTION = "@triton.jit\ndef gemm" + GEMM_BODY + '''

def launch(a, b, c):
    M, K = a.shape
    N = b.shape[1]
    block_m, block_n, block_k, num_warps = _config(M, a.dtype)
    gemm[(M // block_m, N // block_n)](a, b, c, M, N, K, BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k, num_warps=num_warps)
'''


# torchao's hqq mixed_mm: heuristics first, then autotune wrapping that, with configs from helpers
WRAPPED_TWICE = "@triton.jit\ndef gemm" + GEMM_BODY + '''

def get_configs_compute_bound():
    return [triton.Config({"BLOCK_M": 128}, num_stages=4), triton.Config({"BLOCK_M": 64}, num_stages=3)]


def get_configs_io_bound():
    return [triton.Config({"BLOCK_M": 16}, num_stages=2)]


_gemm = triton.heuristics({"EVEN_K": lambda args: args["K"] % 64 == 0})(gemm)
gemm_tuned = triton.autotune(
    configs=get_configs_compute_bound() + get_configs_io_bound(), key=["M", "N", "K"]
)(_gemm)
'''

# sglang's chunk_delta_h: one autotune config whose values are env knobs read at import
ENV_CONFIG = ("import os\n\nBM = int(os.getenv('GEMM_BM', '64'))\nWARPS = int(os.getenv('GEMM_WARPS', '4'))\n\n"
              "@triton.autotune(configs=[triton.Config({'BLOCK_M': BM}, num_warps=WARPS)], key=['M'])\n@triton.jit\ndef gemm" + GEMM_BODY)


@pytest.mark.parametrize("src", [LIBTUNER, WRAPPED, CONFIG_TABLE, TABLE_FUNCTION, WRAPPED_TWICE, ENV_CONFIG],
                         ids=["libtuner", "wrapper", "json-table", "table-function", "wrapper-of-wrapper", "env-config"])
def test_tuning_without_triton_autotune_counts_as_tuned(library, src):
    s = subject(src, "gemm")
    assert present(library, "autotune_configs_keys", s)
    assert not applies(library, "autotune_configs_keys", s)


def test_configs_of_a_wrapping_autotune_give_num_stages(library):
    verdict = evaluate(library["software_pipelining_num_stages"].present_when, subject(WRAPPED_TWICE, "gemm"))
    assert verdict.ok and verdict.reasons[0] == "num_stages=4 (line 5)"
    # and the loop whose loads num_stages pipelines
    assert verdict.reasons[1:] == ["call tl.load in a loop: `tl.load(a + rm[:, None] * K + (k + rk)[None, :])` (line 13, 1 more line)"]


def test_num_stages_on_a_kernel_without_a_loop_is_no_pipelining(library):
    """FLA autotunes num_stages on chunk kernels that have no loop (chunk_ttt_linear_fwd_kernel_o): nothing
    is pipelined there; the same configs on a K loop are."""
    tuned = ("@triton.autotune(configs=[triton.Config({}, num_stages=s) for s in [2, 3]], key=['N'])\n@triton.jit\n")
    flat = tuned + '''def scale_rows(X, Y, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(X + row * N + cols, mask=cols < N, other=0.0)
    tl.store(Y + row * N + cols, x * 2.0, mask=cols < N)
'''
    assert not present(library, "software_pipelining_num_stages", subject(flat, "scale_rows"))
    assert present(library, "software_pipelining_num_stages", subject(tuned + "def gemm" + GEMM_BODY, "gemm"))


def test_one_config_of_fixed_constants_is_not_tuned(library):
    src = ("BM = 64\n\n@triton.autotune(configs=[triton.Config({'BLOCK_M': BM})], key=['M'])\n@triton.jit\ndef gemm" + GEMM_BODY
           + "\n\ndef launch(a, b, c, M, N, K):\n    gemm[(M // 64, N // 64)](a, b, c, M, N, K, BLOCK_N=64, BLOCK_K=32)\n")
    assert not present(library, "autotune_configs_keys", subject(src, "gemm"))


def test_fixed_launch_is_not_tuned(library):
    src = "@triton.jit\ndef gemm" + GEMM_BODY + "\n\ndef launch(a, b, c, M, N, K):\n    gemm[(M // 64, N // 64)](a, b, c, M, N, K, BLOCK_M=64, BLOCK_N=64, BLOCK_K=32)\n"
    s = subject(src, "gemm")
    assert not present(library, "autotune_configs_keys", s)
    assert applies(library, "autotune_configs_keys", s)


def test_num_stages_in_generated_configs_counts_as_pipelined(library):
    src = ("@triton.autotune(configs=[triton.Config({}, num_warps=w, num_stages=s) for w in [4, 8] for s in [2, 3, 4]], key=['K'])\n"
           "@triton.jit\ndef gemm" + GEMM_BODY)
    assert present(library, "software_pipelining_num_stages", subject(src, "gemm"))


# -- tl.dot_scaled is a dot -------------------------------------------------------------

DOT_SCALED = GEMM_BODY.replace("acc += tl.dot(x, w)", "acc += tl.dot_scaled(x, None, 'e4m3', w, None, 'e4m3')")


def test_dot_scaled_is_a_dot(library):
    s = subject("@triton.jit\ndef mx_gemm" + DOT_SCALED, "mx_gemm")
    assert evaluate(library["tma_tensor_descriptors"].applies_when.conditions, s).ok
    assert applies(library, "grouped_pid_ordering", s)
    # no TF32 question for microscaled operands
    assert not applies(library, "tf32x3_dot_precision", s)


BLOCK_PTR_GEMM = '''
@triton.jit
def bp_gemm(a, b, c, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m, pid_n = tl.program_id(0), tl.program_id(1)
    a_ptr = tl.make_block_ptr(a, (M, K), (K, 1), (pid_m * BLOCK_M, 0), (BLOCK_M, BLOCK_K), (1, 0))
    b_ptr = tl.make_block_ptr(b, (K, N), (N, 1), (0, pid_n * BLOCK_N), (BLOCK_K, BLOCK_N), (1, 0))
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        acc += tl.dot(tl.load(a_ptr, boundary_check=(0, 1)), tl.load(b_ptr, boundary_check=(0, 1)))
        a_ptr = tl.advance(a_ptr, (0, BLOCK_K))
        b_ptr = tl.advance(b_ptr, (BLOCK_K, 0))
    c_ptr = tl.make_block_ptr(c, (M, N), (N, 1), (pid_m * BLOCK_M, pid_n * BLOCK_N), (BLOCK_M, BLOCK_N), (1, 0))
    tl.store(c_ptr, acc, boundary_check=(0, 1))
'''


def test_block_pointer_gemm_is_offered_tensor_descriptors(library):
    # torchao's matmul_kernel_with_block_pointers: block pointers are removed from Triton 3.9, and
    # tensor descriptors replace them; the pattern only looked at raw-pointer tiles
    s = subject(BLOCK_PTR_GEMM, "bp_gemm")
    v = evaluate(library["tma_tensor_descriptors"].applies_when.conditions, s)
    assert v.ok and v.lines == [12]
    assert v.reasons[0].startswith("load/store via block_ptr in a loop: `tl.load(a_ptr, boundary_check=(0, 1))`")
    assert not present(library, "tma_tensor_descriptors", s)


# -- persistent loops: while loops, and kernels without tl.dot ------------------------------

WHILE_PERSISTENT = '''
@triton.jit
def grouped_gemm(x, w, y, m_sizes, N: tl.constexpr, K: tl.constexpr, NUM_EXPERTS: tl.constexpr, NUM_SMS: tl.constexpr,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    tidx = tl.program_id(0)
    done = 0
    for e in range(NUM_EXPERTS):
        m = tl.load(m_sizes + e)
        tiles = tl.cdiv(m, BLOCK_M) * tl.cdiv(N, BLOCK_N)
        while tidx >= done and tidx < done + tiles:
            t = tidx - done
            rm = (t % tl.cdiv(m, BLOCK_M)) * BLOCK_M + tl.arange(0, BLOCK_M)
            rn = (t // tl.cdiv(m, BLOCK_M)) * BLOCK_N + tl.arange(0, BLOCK_N)
            acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
            for k in range(0, K, BLOCK_K):
                a = tl.load(x + rm[:, None] * K + k + tl.arange(0, BLOCK_K)[None, :])
                b = tl.load(w + (k + tl.arange(0, BLOCK_K))[:, None] * N + rn[None, :])
                acc += tl.dot(a, b)
            tl.store(y + rm[:, None] * N + rn[None, :], acc)
            tidx += NUM_SMS
        done += tiles
'''

ELEMENTWISE = '''
@triton.jit
def scale_kernel(x, y, n, alpha, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offs < n
    tl.store(y + offs, tl.load(x + offs, mask=mask) * alpha, mask=mask)


def scale(x, alpha):
    y = torch.empty_like(x)
    n = x.numel()
    scale_kernel[(triton.cdiv(n, 1024),)](x, y, n, alpha, BLOCK_SIZE=1024)
    return y
'''


def test_while_loop_grid_stride_is_persistent(library):
    s = subject(WHILE_PERSISTENT, "grouped_gemm")
    assert present(library, "persistent_tile_loop", s)
    assert not applies(library, "persistent_tile_loop", s)


def test_persistent_loop_considered_without_tl_dot(library):
    assert applies(library, "persistent_tile_loop", subject(ELEMENTWISE, "scale_kernel"))


PERSISTENT_EPILOGUE = '''
@triton.jit
def persistent_gemm(a, b, c, M, N, K, alpha, beta, NUM_SMS: tl.constexpr,
                    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    num_n = tl.cdiv(N, BLOCK_N)
    for tile in tl.range(tl.program_id(0), tl.cdiv(M, BLOCK_M) * num_n, NUM_SMS, flatten=True):
        rm = (tile // num_n) * BLOCK_M + tl.arange(0, BLOCK_M)
        rn = (tile % num_n) * BLOCK_N + tl.arange(0, BLOCK_N)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k in range(0, K, BLOCK_K):
            rk = k + tl.arange(0, BLOCK_K)
            acc = tl.dot(tl.load(a + rm[:, None] * K + rk[None, :]), tl.load(b + rk[:, None] * N + rn[None, :]), acc)
        out = tl.fma(acc, alpha, beta * tl.load(c + rm[:, None] * N + rn[None, :]))
        tl.store(c + rm[:, None] * N + rn[None, :], out)
'''


def test_epilogue_inside_a_persistent_tile_loop_is_fused(library):
    # flashinfer's sm_constraint_gemm applies alpha/beta per tile inside its persistent loop: the
    # epilogue check only looked outside every loop, and fused_epilogue counted as not applied
    s = subject(PERSISTENT_EPILOGUE, "persistent_gemm")
    verdict = evaluate(library["fused_epilogue"].present_when, s)
    assert verdict.ok and verdict.lines == [16]
    plain = PERSISTENT_EPILOGUE.replace("        out = tl.fma(acc, alpha, beta * tl.load(c + rm[:, None] * N + rn[None, :]))\n", "        out = acc\n")
    assert not present(library, "fused_epilogue", subject(plain, "persistent_gemm"))


# -- a decode attention is no linear recurrence -------------------------------------------

DECODE_ATTENTION = '''
@triton.jit
def decode_attention(q, k, v, o, T, D: tl.constexpr, BLOCK_N: tl.constexpr, NUM_SPLITS: tl.constexpr):
    bh = tl.program_id(0)
    offs_d = tl.arange(0, D)
    b_q = tl.load(q + bh * D + offs_d).to(tl.float32)
    for s in range(NUM_SPLITS):
        m_i = -float("inf")
        l_i = 0.0
        acc = tl.zeros([D], dtype=tl.float32)
        for start in range(s * T // NUM_SPLITS, (s + 1) * T // NUM_SPLITS, BLOCK_N):
            offs_n = start + tl.arange(0, BLOCK_N)
            b_k = tl.load(k + bh * T * D + offs_n[:, None] * D + offs_d[None, :]).to(tl.float32)
            b_v = tl.load(v + bh * T * D + offs_n[:, None] * D + offs_d[None, :]).to(tl.float32)
            qk = tl.sum(b_k * b_q[None, :], 1)
            m_new = tl.maximum(m_i, tl.max(qk, 0))
            p = tl.exp(qk - m_new)
            alpha = tl.exp(m_i - m_new)
            acc = acc * alpha + tl.sum(p[:, None] * b_v, 0)
            l_i = l_i * alpha + tl.sum(p, 0)
            m_i = m_new
        tl.store(o + (bh * NUM_SPLITS + s) * D + offs_d, acc / l_i)
'''

LINEAR_RECURRENCE = '''
@triton.jit
def gated_recurrence(x, g, o, T, D: tl.constexpr, BD: tl.constexpr):
    i_d = tl.program_id(0)
    i_n = tl.program_id(1)
    o_d = i_d * BD + tl.arange(0, BD)
    b_h = tl.zeros([BD], dtype=tl.float32)
    for t in range(0, T):
        b_x = tl.load(x + (i_n * T + t) * D + o_d).to(tl.float32)
        b_g = tl.load(g + (i_n * T + t) * D + o_d).to(tl.float32)
        b_h = tl.exp(b_g) * b_h + b_x
        b_s = tl.sum(b_h * b_x)
        tl.store(o + (i_n * T + t) * D + o_d, b_h * b_s)
'''


def test_linear_recurrence_pattern_not_on_decode_attention(library):
    assert not applies(library, "chunkwise_scan_checkpointing", subject(DECODE_ATTENTION, "decode_attention"))
    assert applies(library, "chunkwise_scan_checkpointing", subject(LINEAR_RECURRENCE, "gated_recurrence"))


SCORE_TILE = '''
@triton.jit
def attn_scores(q, k, attn, T, scale, K: tl.constexpr, BT: tl.constexpr, BK: tl.constexpr, NK: tl.constexpr):
    i_t, i_s = tl.program_id(0), tl.program_id(1)
    o_q = i_t * BT + tl.arange(0, BT)
    o_k = i_s * BT + tl.arange(0, BT)
    b_s = tl.zeros([BT, BT], dtype=tl.float32)
    for i_kk in tl.static_range(NK):
        o_kk = i_kk * BK + tl.arange(0, BK)
        b_q = tl.load(q + o_q[:, None] * K + o_kk[None, :])
        b_k = tl.load(k + o_kk[:, None] + o_k[None, :] * K)
        b_s += tl.dot(b_q, b_k)
    b_s = b_s * scale
    tl.store(attn + o_q[:, None] * T + o_k[None, :], b_s)
'''

GLUON_ONLINE_SOFTMAX = '''
from triton.experimental import gluon
from triton.experimental.gluon import language as gl


@gluon.jit
def weighted_rows(x, w, o, L: tl.constexpr, D: tl.constexpr):
    i = gl.program_id(0)
    b_m = -float("inf")
    b_acc = 0.0
    for i_l in gl.static_range(L):
        b_v = gl.load(x + (i * L + i_l) * D + gl.arange(0, D))
        b_s = gl.sum(b_v * gl.load(w + gl.arange(0, D)), 0)
        b_m, b_mp = gl.maximum(b_m, b_s), b_m
        b_r = gl.exp(b_mp - b_m)
        b_acc = b_acc * b_r + gl.exp(b_s - b_m)
    gl.store(o + i, b_acc)
'''


def test_dot_accumulator_scaled_after_its_loop_is_no_recurrence(library):
    # FLA's Ascend parallel attention accumulates `b_s += tl.dot(q, k)` over K and scales b_s after the
    # loop: the scaling outside the loop made it a "decayed state", and recurrent_state_in_out ranked
    # first on an attention kernel
    s = subject(SCORE_TILE, "attn_scores")
    carried = evaluate(library["recurrent_state_in_out"].applies_when.conditions.children[0], s)
    assert not carried.ok and carried.reasons == ["no state decayed and updated across loop iterations"]
    assert not applies(library, "recurrent_state_in_out", s)
    assert not applies(library, "chunkwise_scan_checkpointing", s)
    # the same update inside the loop is a recurrence
    inside = SCORE_TILE.replace("        b_s += tl.dot(b_q, b_k)\n    b_s = b_s * scale\n", "        b_s = b_s * scale + tl.dot(b_q, b_k)\n")
    assert applies(library, "recurrent_state_in_out", subject(inside, "attn_scores"))


RELOADED = '''
@triton.jit
def gated_delta(q, k, v, g, o, T, K: tl.constexpr, V: tl.constexpr):
    i_h = tl.program_id(0)
    o_k = tl.arange(0, K)
    o_v = tl.arange(0, V)
    b_h = tl.zeros([K, V], dtype=tl.float32)
    for t in range(0, T):
        b_q = tl.load(q + (i_h * T + t) * K + o_k).to(tl.float32)
        b_q = b_q * tl.rsqrt(tl.sum(b_q * b_q) + 1e-6) + 1e-6
        b_k = tl.load(k + (i_h * T + t) * K + o_k).to(tl.float32)
        b_v = tl.load(v + (i_h * T + t) * V + o_v).to(tl.float32)
        b_h = b_h * tl.exp(tl.load(g + i_h * T + t)) + b_k[:, None] * b_v[None, :]
        tl.store(o + (i_h * T + t) * V + o_v, tl.sum(b_h * b_q[:, None], 0))
'''


def test_a_value_reloaded_every_iteration_is_no_state(library):
    # FLA's gdn2 fused_recurrent normalises the freshly loaded b_q each step; the recurrence was named
    # after b_q (loaded, then `b_q * ... + ...`) instead of the state b_h
    from patterns.core.predicates import PREDICATES

    v = PREDICATES["recurrence_state"].func(subject(RELOADED, "gated_delta"))
    assert v.ok and v.reasons == ["b_h is decayed and updated every iteration of the loop at line 11"]
    only_q = RELOADED.replace("        b_h = b_h * tl.exp(tl.load(g + i_h * T + t)) + b_k[:, None] * b_v[None, :]\n",
                              "        b_h = b_k[:, None] * b_v[None, :]\n")
    assert not PREDICATES["recurrence_state"].func(subject(only_q, "gated_delta")).ok


def test_gluon_online_softmax_is_no_recurrent_state(library):
    # FLA's attnres Gluon kernel rescales a running sum by exp(m_old - m_new): an online softmax
    s = subject(GLUON_ONLINE_SOFTMAX, "weighted_rows")
    assert evaluate(library["recurrent_state_in_out"].applies_when.conditions.children[0], s).ok  # b_acc is carried
    assert not applies(library, "recurrent_state_in_out", s)


# -- hoisted constants: applied only where it was done ------------------------------------

HOISTED = '''
@triton.jit
def fused_recurrent(x, A_log, o, T, D: tl.constexpr):
    i_h = tl.program_id(0)
    o_d = tl.arange(0, D)
    b_A = -tl.exp(tl.load(A_log + i_h))
    b_h = tl.load(x + i_h * T * D + o_d).to(tl.float32)
    for t in range(1, T):
        b_x = tl.load(x + (i_h * T + t) * D + o_d).to(tl.float32)
        b_h = tl.exp(b_A) * b_h + b_x
        tl.store(o + (i_h * T + t) * D + o_d, b_h)
'''


def test_hoist_is_not_reported_applied_on_any_loop(library):
    assert not present(library, "hoist_tile_invariant_work", subject(THREE_PASS_SOFTMAX, "softmax_three_pass"))
    assert not present(library, "hoist_tile_invariant_work", subject(WHILE_PERSISTENT, "grouped_gemm"))
    assert present(library, "hoist_tile_invariant_work", subject(HOISTED, "fused_recurrent"))
    assert not present(library, "hoist_tile_invariant_work", subject(HOISTED.replace("    b_A = -tl.exp(tl.load(A_log + i_h))\n", "").replace(
        "b_h = tl.exp(b_A)", "b_h = tl.exp(-tl.exp(tl.load(A_log + i_h)))"), "fused_recurrent"))


# -- why it applies: code and line, never a regular expression ------------------------------

THREE_PASS_SOFTMAX = '''
@triton.jit
def softmax_three_pass(X, Y, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    m = -float("inf")
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        m = tl.maximum(m, tl.max(tl.load(X + row * N + cols, mask=cols < N, other=-float("inf")), 0))
    d = 0.0
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        d += tl.sum(tl.exp(tl.load(X + row * N + cols, mask=cols < N, other=-float("inf")) - m), 0)
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(X + row * N + cols, mask=cols < N, other=-float("inf"))
        tl.store(Y + row * N + cols, tl.exp(x - m) / d, mask=cols < N)
'''


def test_reasons_show_code_and_line_not_regexes(library):
    verdict = evaluate(library["online_softmax"].applies_when.conditions, subject(THREE_PASS_SOFTMAX, "softmax_three_pass"))
    assert verdict.ok
    text = " ".join(verdict.reasons)
    assert "tl.exp(" in text and "(line " in text
    assert "(.*" not in text and "\\." not in text
    assert readable(["(.*\\.)?(exp|exp2|expf|fast_expf)"]) == "exp/exp2/expf/fast_expf"
    assert readable(["tl\\.math\\..*", "(?i)(.*\\.)?_?welford\\w*"]) == "tl.math.*/welford"


def test_running_max_of_two_values_is_online_softmax(library):
    src = THREE_PASS_SOFTMAX.replace("softmax_three_pass", "softmax_online")
    online = '''
@triton.jit
def softmax_two_pass(X, Y, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    m = tl.float32(-float("inf"))
    d = tl.float32(0.0)
    for start in tl.range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(X + row * N + cols, mask=cols < N, other=-float("inf"))
        new_m = tl.max(m, tl.max(x, axis=0))
        d = d * tl.exp(m - new_m) + tl.sum(tl.exp(x - new_m), axis=0)
        m = new_m
    for start in tl.range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(X + row * N + cols, mask=cols < N, other=-float("inf"))
        tl.store(Y + row * N + cols, tl.exp(x - m) / d, mask=cols < N)
'''
    assert present(library, "online_softmax", subject(online, "softmax_two_pass"))
    assert not present(library, "online_softmax", subject(src, "softmax_online"))


# -- PDL only for a kernel launched after another; TMA only for the kernel that uses it ----

TWO_KERNELS = '''
@triton.jit
def first(x, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x + offs, tl.load(x + offs) * 2)


@triton.jit
def second(x, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x + offs, tl.load(x + offs) + 1)


def run(x):
    n = x.numel()
    first[(n // 256,)](x, n, BLOCK=256)
    second[(n // 256,)](x, n, BLOCK=256)
'''


def test_pdl_only_for_the_dependent_kernel(library):
    assert not applies(library, "programmatic_dependent_launch", subject(TWO_KERNELS, "first"))
    assert applies(library, "programmatic_dependent_launch", subject(TWO_KERNELS, "second"))


HOST_DESCRIPTOR = '''from triton.tools.tensor_descriptor import TensorDescriptor


@triton.jit
def gemm_tma(a_desc, b_desc, c, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        acc += tl.dot(a_desc.load([pid_m * BLOCK_M, k]), b_desc.load([k, pid_n * BLOCK_N]))
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    tl.store(c + rm[:, None] * N + rn[None, :], acc)


@triton.jit
def gemm''' + GEMM_BODY + '''

def run(a, b, c, M, N, K):
    a_desc = TensorDescriptor.from_tensor(a, [128, 64])
    b_desc = TensorDescriptor.from_tensor(b, [64, 128])
    gemm_tma[(M // 128, N // 128)](a_desc, b_desc, c, M, N, K, BLOCK_M=128, BLOCK_N=128, BLOCK_K=64)
'''


def test_host_descriptor_applies_to_the_kernel_that_uses_it(library):
    assert present(library, "tma_tensor_descriptors", subject(HOST_DESCRIPTOR, "gemm_tma"))
    plain = subject(HOST_DESCRIPTOR, "gemm")
    assert not present(library, "tma_tensor_descriptors", plain)
    assert applies(library, "tma_tensor_descriptors", plain)
