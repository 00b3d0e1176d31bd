"""Software-pipeline a kernel's load loop: `range(a, b, c)` -> `tl.range(a, b, c, num_stages=S)`.

Kernel (where=loop, the default): every innermost `range`/`tl.range` loop that
loads from memory in its own body (the K loop of a GEMM, the KV loop of an
attention) is iterated with tl.range(..., num_stages=S), so S - 1 tiles are in
flight while the current one is used; loops without loads keep the launch's
setting. Launcher (where=launch): num_stages=S is passed at the launch (or an
existing num_stages replaced), which pipelines every loop of the kernel. S is
the param `num_stages` (default 3). Loads, math and results are unchanged: the
pipeliner only reorders when loads are issued.

Refuses: a loop whose trip count is read from memory (a sequence length loaded
per program: short, data-dependent loops gain nothing and pay the prologue); a
kernel whose only load loops are unrolled (tl.static_range) or `while` loops;
where=launch on an autotuned kernel (num_stages belongs in its configs).
Note: S is not checked against shared memory; a too-deep S fails to compile
(OutOfResources) on the GPU, and validation sees it.
"""
from __future__ import annotations

import libcst as cst
import libcst.matchers as m

from patterns.rewriter.edits import PlannedCodemod, code, find_launch, insert_args, kwarg

# paged decode attention: the KV length of each sequence is loaded by the program
_LOADED_LENGTH = '''
import torch
import triton
import triton.language as tl


@triton.jit
def paged_decode_kernel(q, k_cache, v_cache, seq_lens, o, scale, H: tl.constexpr, D: tl.constexpr, BT: tl.constexpr):
    i_b, i_h = tl.program_id(0), tl.program_id(1)
    seq_len = tl.load(seq_lens + i_b)
    o_d = tl.arange(0, D)
    b_q = tl.load(q + (i_b * H + i_h) * D + o_d).to(tl.float32)
    b_m, b_l = float("-inf"), 0.0
    b_acc = tl.zeros([D], dtype=tl.float32)
    for i_t in range(0, seq_len, BT):
        o_t = i_t + tl.arange(0, BT)
        m_t = o_t < seq_len
        b_k = tl.load(k_cache + ((i_b * 4096 + o_t[:, None]) * H + i_h) * D + o_d[None, :], mask=m_t[:, None], other=0.0)
        b_s = tl.where(m_t, tl.sum(b_k * b_q[None, :], 1) * scale, float("-inf"))
        b_m_new = tl.maximum(b_m, tl.max(b_s, 0))
        b_p = tl.exp(b_s - b_m_new)
        b_alpha = tl.exp(b_m - b_m_new)
        b_v = tl.load(v_cache + ((i_b * 4096 + o_t[:, None]) * H + i_h) * D + o_d[None, :], mask=m_t[:, None], other=0.0)
        b_acc = b_acc * b_alpha + tl.sum(b_p[:, None] * b_v, 0)
        b_l = b_l * b_alpha + tl.sum(b_p, 0)
        b_m = b_m_new
    tl.store(o + (i_b * H + i_h) * D + o_d, b_acc / b_l)


def paged_decode(q, k_cache, v_cache, seq_lens):
    B, H, D = q.shape
    o = torch.empty_like(q)
    paged_decode_kernel[(B, H)](q, k_cache, v_cache, seq_lens, o, D**-0.5, H=H, D=D, BT=64)
    return o
'''

# a short unrolled loop over the four gates of an LSTM cell: nothing to pipeline
_STATIC = '''
import torch
import triton
import triton.language as tl


@triton.jit
def lstm_gates_kernel(x, w, b, y, D: tl.constexpr):
    i_b = tl.program_id(0)
    o_d = tl.arange(0, D)
    b_x = tl.load(x + i_b * D + o_d)
    for i_g in tl.static_range(4):
        b_w = tl.load(w + (i_g * D + o_d[:, None]) * D + o_d[None, :])
        b_g = tl.sum(b_w * b_x[None, :], 1) + tl.load(b + i_g * D + o_d)
        tl.store(y + (i_b * 4 + i_g) * D + o_d, b_g)


def lstm_gates(x, w, b):
    B, D = x.shape
    y = torch.empty(B, 4, D, device=x.device, dtype=x.dtype)
    lstm_gates_kernel[(B,)](x, w, b, y, D=D)
    return y
'''

# tests/retrieval_set/flash_attention_fwd.py: the KV loop of a prefill attention
_FLASH = '''
import torch
import triton
import triton.language as tl


@triton.jit
def attn_fwd_kernel(q, k, v, o, qk_scale, T, D: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr):
    i_m, i_bh = tl.program_id(0), tl.program_id(1).to(tl.int64)
    o_m = i_m * BM + tl.arange(0, BM)
    o_d = tl.arange(0, D)
    b_q = tl.load(q + (i_bh * T + o_m[:, None]) * D + o_d[None, :], mask=o_m[:, None] < T, other=0.0)
    b_q = (b_q * (qk_scale * 1.44269504)).to(tl.float32)
    b_m = tl.full([BM], float("-inf"), dtype=tl.float32)
    b_l = tl.zeros([BM], dtype=tl.float32)
    b_acc = tl.zeros([BM, D], dtype=tl.float32)
    for i_n in range(0, T, BN):
        o_n = i_n + tl.arange(0, BN)
        b_k = tl.load(k + (i_bh * T + o_n[:, None]) * D + o_d[None, :], mask=o_n[:, None] < T, other=0.0).to(tl.float32)
        b_s = tl.dot(b_q, tl.trans(b_k))
        b_s = tl.where(o_n[None, :] < T, b_s, float("-inf"))
        b_m_new = tl.maximum(b_m, tl.max(b_s, axis=1))
        b_p = tl.exp2(b_s - b_m_new[:, None])
        b_alpha = tl.exp2(b_m - b_m_new)
        b_v = tl.load(v + (i_bh * T + o_n[:, None]) * D + o_d[None, :], mask=o_n[:, None] < T, other=0.0).to(tl.float32)
        b_acc = b_acc * b_alpha[:, None] + tl.dot(b_p, b_v)
        b_l = b_l * b_alpha + tl.sum(b_p, axis=1)
        b_m = b_m_new
    tl.store(o + (i_bh * T + o_m[:, None]) * D + o_d[None, :], b_acc / b_l[:, None], mask=o_m[:, None] < T)


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    BH, T, D = q.shape
    o = torch.empty_like(q)
    attn_fwd_kernel[(triton.cdiv(T, 64), BH)](q, k, v, o, D**-0.5, T, D=D, BM=64, BN=64)
    return o
'''

# tests/retrieval_set/persistent_gemm.py: only the inner K loop loads; the tile loop is left alone
_PERSISTENT = '''
import torch
import triton
import triton.language as tl


@triton.jit
def persistent_matmul_kernel(a, b, c, M, N, K, NUM_SMS: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    start = tl.program_id(0)
    num_pid_n = tl.cdiv(N, BN)
    num_tiles = tl.cdiv(M, BM) * num_pid_n
    o_k = tl.arange(0, BK)
    for tile in range(start, num_tiles, NUM_SMS):
        i_m, i_n = tile // num_pid_n, tile % num_pid_n
        o_m = i_m * BM + tl.arange(0, BM)
        o_n = i_n * BN + tl.arange(0, BN)
        b_acc = tl.zeros([BM, BN], dtype=tl.float32)
        for i_k in range(0, K, BK):
            b_a = tl.load(a + o_m[:, None] * K + (i_k + o_k)[None, :], mask=(o_m[:, None] < M) & ((i_k + o_k)[None, :] < K), other=0.0)
            b_b = tl.load(b + (i_k + o_k)[:, None] * N + o_n[None, :], mask=((i_k + o_k)[:, None] < K) & (o_n[None, :] < N), other=0.0)
            b_acc += tl.dot(b_a, b_b)
        tl.store(c + o_m[:, None] * N + o_n[None, :], b_acc.to(c.dtype.element_ty), mask=(o_m[:, None] < M) & (o_n[None, :] < N))


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty(M, N, device=a.device, dtype=a.dtype)
    num_sms = torch.cuda.get_device_properties(a.device).multi_processor_count if a.is_cuda else 4
    tiles = triton.cdiv(M, 128) * triton.cdiv(N, 128)
    persistent_matmul_kernel[(min(num_sms, tiles),)](a, b, c, M, N, K, NUM_SMS=num_sms, BM=128, BN=128, BK=64)
    return c
'''


class SoftwarePipeliningNumStages(PlannedCodemod):
    PATTERN = "software_pipelining_num_stages"
    DESCRIPTION = "load loops iterated with tl.range(..., num_stages=S)"
    REFUSES = [
        (_LOADED_LENGTH, r"the trip count of the loop on line 15 \(`range\(0, seq_len, BT\)`\) is read from memory \(seq_len\)"),
        (_STATIC, r"the only loop that loads \(line 12\) is tl.static_range: unrolled, nothing to pipeline"),
        ("def f():\n    return 1\n", "no Triton kernel"),
    ]
    ACCEPTS = [_FLASH, _PERSISTENT]

    def plan(self, module: cst.Module) -> None:
        k = self.kernel
        stages = self.params["num_stages"]
        tl = next((alias for alias, full in self.facts.imports.items() if full == "triton.language"), None)
        loading = {}  # loop line -> LoopFacts, for loops that load in their own body
        by_line = {lp.line: lp for lp in k.loops}
        for c in k.calls:
            if c.name == "tl.load" and not c.via and c.loops:
                loading[c.loops[-1]] = by_line[c.loops[-1]]
        if not loading:
            self.refuse(f"{k.name} has no loop that loads from memory")
        # innermost: a loading loop with another loading loop inside it is left to its inner one
        inner = [lp for lp in loading.values() if not any(o.line != lp.line and lp.line < o.line <= lp.end_line for o in loading.values())]
        candidates = [lp for lp in inner if lp.kind in ("range", "tl.range") and "num_stages" not in lp.kwargs]
        if not candidates:
            lp = inner[0]
            what = "tl.static_range: unrolled, nothing to pipeline" if lp.kind == "tl.static_range" else f"a `{lp.kind}` loop, not a range"
            self.refuse(f"the only loop that loads (line {lp.line}) is {what}")
        loaded = set(k.loaded)
        for lp in candidates:
            bound = next((c for c in k.calls if c.line == lp.line and c.name in ("range", "tl.range") and not c.via), None)
            deps = sorted(set(bound.depends_on) & loaded) if bound else []
            if deps or "tl.load" in lp.iter:
                self.refuse(f"the trip count of the loop on line {lp.line} (`{lp.iter}`) is read from memory ({', '.join(deps) or 'tl.load'}): "
                            "a short data-dependent loop gains nothing from pipelining and pays its prologue")
        if self.params["where"] == "launch":
            if k.autotune is not None:
                self.refuse(f"{k.name} is autotuned: set num_stages in its configs")
            if not k.launches:
                self.refuse(f"no launch of {k.name} in this file to pass num_stages")
            params = [p.name for p in k.params]
            for launch in k.launches:
                la = find_launch(self, module, launch.line, params)
                old = la.options.get("num_stages")
                if old is not None:
                    self.replace(old, lambda u: u.with_changes(value=cst.Integer(str(stages))))
                else:
                    self.replace(la.call, lambda u: insert_args(u, [(len(u.args), kwarg("num_stages", str(stages)))]))
                    self.keep_width(la.stmt)
            return
        if tl is None:
            self.refuse("the file does not import triton.language: no tl.range to iterate with")
        lines = {lp.line for lp in candidates}
        for loop in m.findall(self.fn.body, m.For()):
            if self.line(loop) in lines:
                self.replace(loop.iter, lambda u: _pipelined(u, tl, stages))  # type: ignore[attr-defined]


def _pipelined(call: cst.Call, tl: str, stages: int) -> cst.Call:
    if code(call.func) == "range":
        call = call.with_changes(func=cst.Attribute(cst.Name(tl), cst.Name("range")))
    args = list(call.args)
    last = args[-1]
    args[-1] = last.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
    args.append(kwarg("num_stages", str(stages)).with_changes(comma=last.comma))
    return call.with_changes(args=args)
