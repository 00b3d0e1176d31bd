"""Give each tile load an L2 eviction policy from who else reads its data.

A tile load whose address depends on every program-id axis the kernel uses is
read by exactly one program: it gets eviction_policy="evict_first" (streamed
once). A tile load whose address is independent of at least one of those axes is
read again by every program along that axis: it gets "evict_last" (kept
resident). An axis the kernel splits as `pid // n` and `pid % n` (tiles folded
into it, as split_underfilled_grid does) counts as two axes: a load that reads
only `pid // n` is shared by the programs of the `pid % n` tiles. A pointer
assigned once and then only advanced by `+=`/`-=` of strides that read no
tl.arange and no program id (`p_q += H * K` in a loop over tokens) is
classified from its first value. A streamed load from an address the
kernel also stores to (an in-place state update: the same pointer expression or
name in a tl.store) is left unhinted. Loads of one scalar, loads through indices
read from memory (reuse depends on the data), loads the same program repeats at
the same address (a second pass over a row), and loads that already carry a
cache hint are left alone. The keyword is appended to the call; a line that
would pass 120 characters continues under the call's first argument. Loads and
results are unchanged: only L2 replacement is.

Refuses: a kernel with no classifiable tile load; one with no streamed load to
mark evict_first (marking everything else evict_last only moves the thrashing
onto it; a load written back in place does not count) or with no reused load
(every program streams its own data: there is nothing for the hint to protect).
"""
from __future__ import annotations

import re

import libcst as cst
import libcst.matchers as m
from libcst.metadata import PositionProvider

from patterns.core.facts import FOLDED_AXIS
from patterns.rewriter.edits import WIDTH, PlannedCodemod, code, kwarg, names_in, pid_axes, pid_call

# each program streams its own rows: nothing is shared between programs
_ELEMENTWISE = '''
import torch
import triton
import triton.language as tl


@triton.jit
def silu_mul_kernel(g, u, y, N, BLOCK: tl.constexpr):
    i_row, i_n = tl.program_id(0).to(tl.int64), tl.program_id(1)
    o_n = i_n * BLOCK + tl.arange(0, BLOCK)
    m_n = o_n < N
    b_g = tl.load(g + i_row * N + o_n, mask=m_n, other=0.0).to(tl.float32)
    b_u = tl.load(u + i_row * N + o_n, mask=m_n, other=0.0).to(tl.float32)
    tl.store(y + i_row * N + o_n, (b_g * tl.sigmoid(b_g) * b_u).to(y.dtype.element_ty), mask=m_n)


def silu_mul(g, u):
    M, N = g.shape
    y = torch.empty_like(g)
    silu_mul_kernel[(M, triton.cdiv(N, 1024))](g, u, y, N, BLOCK=1024)
    return y
'''

# rows gathered through token ids: which rows are shared depends on the ids, not on the code
_GATHER = '''
import torch
import triton
import triton.language as tl


@triton.jit
def embedding_kernel(ids, table, out, D: tl.constexpr, BD: tl.constexpr):
    i_t = tl.program_id(0).to(tl.int64)
    o_d = tl.arange(0, BD)
    m_d = o_d < D
    i_tok = tl.load(ids + i_t)
    b_e = tl.load(table + i_tok * D + o_d, mask=m_d, other=0.0)
    tl.store(out + i_t * D + o_d, b_e, mask=m_d)


def embedding(ids, table):
    T = ids.numel()
    D = table.shape[1]
    out = torch.empty(T, D, device=table.device, dtype=table.dtype)
    embedding_kernel[(T,)](ids, table, out, D=D, BD=triton.next_power_of_2(D))
    return out
'''

# tests/retrieval_set/streaming_lookup_scale.py: x streamed, the per-channel table re-read by every program
_LOOKUP = '''
import torch
import triton
import triton.language as tl


@triton.jit
def channel_scale_kernel(x, table, y, N, C: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    o = pid * BLOCK + tl.arange(0, BLOCK)
    m = o < N
    b_x = tl.load(x + o, mask=m, other=0.0)
    b_s = tl.load(table + o % C, mask=m, other=0.0)
    tl.store(y + o, b_x * b_s, mask=m)


def channel_scale(x, table):
    N = x.numel()
    y = torch.empty_like(x)
    channel_scale_kernel[(triton.cdiv(N, 4096),)](x, table, y, N, C=table.numel(), BLOCK=4096)
    return y
'''

# tests/retrieval_set/gemm_naive.py on a 2-D grid: A is shared along N tiles, B along M tiles, and C, the one
# load no other program reads, is accumulated into in place: nothing streams to mark evict_first
_GEMM_2D = '''
import torch
import triton
import triton.language as tl


@triton.jit
def bias_matmul_kernel(a, b, bias, c, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    i_m, i_n = tl.program_id(0), tl.program_id(1)
    o_m = i_m * BM + tl.arange(0, BM)
    o_n = i_n * BN + tl.arange(0, BN)
    o_k = tl.arange(0, BK)
    b_acc = tl.zeros([BM, BN], dtype=tl.float32)
    for i_k in range(0, K, BK):
        b_a = tl.load(a + o_m[:, None] * K + (i_k + o_k)[None, :], mask=(o_m[:, None] < M) & ((i_k + o_k)[None, :] < K), other=0.0)
        b_b = tl.load(b + (i_k + o_k)[:, None] * N + o_n[None, :], mask=((i_k + o_k)[:, None] < K) & (o_n[None, :] < N), other=0.0)
        b_acc += tl.dot(b_a, b_b)
    b_c = tl.load(c + o_m[:, None] * N + o_n[None, :], mask=(o_m[:, None] < M) & (o_n[None, :] < N), other=0.0)
    b_acc += b_c + tl.load(bias + o_n, mask=o_n < N, other=0.0)[None, :]
    tl.store(c + o_m[:, None] * N + o_n[None, :], b_acc, mask=(o_m[:, None] < M) & (o_n[None, :] < N))


def bias_matmul_(c, a, b, bias):
    M, K = a.shape
    N = b.shape[1]
    bias_matmul_kernel[(triton.cdiv(M, 64), triton.cdiv(N, 64))](a, b, bias, c, M, N, K, BM=64, BN=64, BK=32)
    return c
'''

# per-token pointers advanced once a step: q is read by every V tile of a head (evict_last), v by one program
# (evict_first); the state is read, updated and written back in place (left unhinted)
_RECURRENT = '''
import torch
import triton
import triton.language as tl


@triton.jit
def decay_recurrent_kernel(q, v, h, o, T, K: tl.constexpr, V: tl.constexpr, BV: tl.constexpr):
    i_bh, i_v = tl.program_id(0).to(tl.int64), tl.program_id(1).to(tl.int64)
    o_k = tl.arange(0, K)
    o_v = i_v * BV + tl.arange(0, BV)
    m_v = o_v < V
    p_q = q + i_bh * T * K + o_k
    p_v = v + i_bh * T * V + o_v
    p_o = o + i_bh * T * V + o_v
    p_h = h + i_bh * K * V + o_k[:, None] * V + o_v[None, :]
    # [K, BV]
    b_h = tl.load(p_h, mask=m_v[None, :], other=0.0)
    for _ in range(0, T):
        b_q = tl.load(p_q)
        b_v = tl.load(p_v, mask=m_v, other=0.0)
        b_h = b_h * 0.9 + b_q[:, None] * b_v[None, :]
        tl.store(p_o, tl.sum(b_h * b_q[:, None], 0), mask=m_v)
        p_q += K
        p_v += V
        p_o += V
    tl.store(p_h, b_h, mask=m_v[None, :])


def decay_recurrent_(q, v, h):
    BH, T, K = q.shape
    V = v.shape[-1]
    o = torch.empty_like(v)
    decay_recurrent_kernel[(BH, triton.cdiv(V, 32))](q, v, h, o, T, K=K, V=V, BV=32)
    return o
'''


class CacheEvictionHints(PlannedCodemod):
    PATTERN = "cache_eviction_hints"
    DESCRIPTION = "eviction_policy evict_first on streamed tile loads, evict_last on loads shared across programs"
    REFUSES = [
        (_ELEMENTWISE, r"no tile load of silu_mul_kernel is shared between programs \(each depends on program_id 0, 1\): "
                       r"there is nothing for evict_last to protect"),
        (_GATHER, r"embedding_kernel has no tile load to classify \(line 13 gathers through i_tok, read from memory\)"),
        (_GEMM_2D, r"the only tile loads of bias_matmul_kernel not shared between programs are written back in place "
                   r"\(line 18\): with nothing to mark evict_first"),
        ("def f():\n    return 1\n", "no Triton kernel"),
    ]
    ACCEPTS = [_LOOKUP, _RECURRENT]

    def plan(self, module: cst.Module) -> None:
        k, body = self.kernel, self.body
        self.lines = module.code.splitlines()
        ids = {a for a in pid_axes(body) if a >= 0}
        if not ids:
            self.refuse(f"{k.name} reads no program_id: every load is shared by the whole grid")
        # tiles folded into an axis (`pid % n`) count as an axis of their own, as in the kernel facts: a load
        # that reads only `pid // n` is shared by the programs of those tiles
        axes = self.axes = ids | {pid_call(n.left)[0] + FOLDED_AXIS for n in m.findall(self.fn, m.BinaryOperation(operator=m.Modulo()))
                                  if pid_call(n.left)}  # type: ignore[attr-defined, index]
        self.advanced = self._advanced()
        loaded = set(k.loaded)
        loads = [c for c in body.calls("tl.load") if c.args and c.args[0].keyword is None]
        stored = {self._address(c.args[0].value) for c in body.calls("tl.store") if c.args and c.args[0].keyword is None}
        seen: dict[str, int] = {}
        for c in loads:
            seen[code(c.args[0].value)] = seen.get(code(c.args[0].value), 0) + 1
        streamed, shared, skipped, in_place = [], [], [], []
        for c in loads:
            kw = {a.keyword.value for a in c.args if a.keyword}
            if kw & {"eviction_policy", "cache_modifier"}:
                continue
            ptr = c.args[0].value
            tile = bool(body.aranges(self._first(ptr))) or k.origins.get(code(ptr), "") in ("tl.make_block_ptr", "tl.advance")
            if not tile:
                continue
            gathered = sorted(n for n in self._reads(ptr) if n in loaded)
            if gathered:
                skipped.append(f"line {self.line(c)} gathers through {gathered[0]}, read from memory")
                continue
            # by its text, not its first value: an advanced pointer reads a new address each time round the loop
            if seen[code(ptr)] > 1:
                skipped.append(f"line {self.line(c)} is read again by the same program")
                continue
            if not self._pid_axes(self._first(ptr)) >= axes:
                shared.append(c)
            elif self._address(ptr) in stored:
                # the store that follows re-touches these lines: evict_first would drop them just before
                # the write-back misses on them (1.5-2% slower on an H200, KDA decode's fp32 state)
                in_place.append(f"line {self.line(c)}")
            else:
                streamed.append(c)
        if not streamed and not shared:
            why = skipped + [f"{w} is written back in place" for w in in_place]
            why = f" ({'; '.join(why)})" if why else ""
            self.refuse(f"{k.name} has no tile load to classify{why}")
        if not shared:
            self.refuse(f"no tile load of {k.name} is shared between programs (each depends on program_id "
                        f"{', '.join(map(str, sorted(ids)))}): there is nothing for evict_last to protect")
        if not streamed and in_place:
            self.refuse(f"the only tile loads of {k.name} not shared between programs are written back in place "
                        f"({', '.join(in_place)}): with nothing to mark evict_first, marking the shared ones evict_last "
                        "protects nothing from a stream")
        if not streamed:
            self.refuse(f"every tile load of {k.name} is shared between programs: marking all of them evict_last "
                        "protects nothing from a stream")
        for c, policy in [*((c, "evict_first") for c in streamed), *((c, "evict_last") for c in shared)]:
            self._hint(c, policy)

    def _advanced(self) -> dict[str, cst.BaseExpression]:
        """name -> first value, for names assigned once and otherwise only moved by `+=`/`-=` of a stride
        that reads no tl.arange and no program id (so the first value says what every address reads)."""
        out, moved = {}, (cst.AddAssign, cst.SubtractAssign)
        for name, bs in self.body.bindings.items():
            first, moves = bs[0], bs[1:]
            if not moves or not isinstance(first.stmt, cst.Assign):
                continue
            if not all(isinstance(b.stmt, cst.AugAssign) and isinstance(b.stmt.operator, moved) for b in moves):
                continue
            if any(self.body.aranges(b.value) or self._pid_axes(b.value) for b in moves):
                continue
            out[name] = first.value
        return out

    def _first(self, node: cst.BaseExpression) -> cst.BaseExpression:
        """The expression expanded through single assignments and advanced pointers' first values."""
        return self.body.expand(node, also=self.advanced)

    def _address(self, node: cst.BaseExpression) -> str:
        """An address as text, through single assignments, spacing ignored: the same name or expression compare equal."""
        return re.sub(r"\s+", "", code(self.body.expand(node)))

    def _reads(self, node: cst.BaseExpression) -> set[str]:
        seen, stack = set(), list(names_in(node))
        while stack:
            n = stack.pop()
            if n in seen:
                continue
            seen.add(n)
            for b in self.body.bindings.get(n, []):
                if not isinstance(b.stmt, cst.For):
                    stack.extend(names_in(b.value))
        return seen

    def _pid_axes(self, node: cst.BaseExpression) -> set[int]:
        """program_id axes an address depends on (the facts' numbering: `pid % n` is axis + FOLDED_AXIS); `o % C`
        of a vector offset wraps into a window every program shares."""
        out: set[int] = set()
        stack = [self.body.expand(node)]
        while stack:
            n = stack.pop()
            if isinstance(n, cst.BinaryOperation) and isinstance(n.operator, cst.Modulo) and self.body.aranges(n.left):
                continue
            if isinstance(n, cst.BinaryOperation) and isinstance(n.operator, cst.Modulo) and pid_call(n.left):
                # read through names, `i_nh % HV` is `pid % HV` too: a part of its own only where the kernel folds
                axis = pid_call(n.left)[0]  # type: ignore[index]
                out.add(axis + FOLDED_AXIS if axis + FOLDED_AXIS in self.axes else axis)
                continue
            if m.matches(n, m.Call(func=m.Attribute(value=m.Name("tl"), attr=m.Name("program_id")))):
                axis = n.args[0].value if n.args else None  # type: ignore[attr-defined]
                out.add(int(axis.value) if isinstance(axis, cst.Integer) else 0)
                continue
            if isinstance(n, cst.Name):
                out |= set(self.kernel.pid_deps.get(n.value, []))
            elif isinstance(n, cst.Attribute):
                stack.append(n.value)
                continue
            stack.extend(c for c in n.children if isinstance(c, cst.CSTNode))
        return out

    def _hint(self, call: cst.Call, policy: str) -> None:
        start = self.get_metadata(PositionProvider, call)
        arg = self.get_metadata(PositionProvider, call.args[0]).start
        added = len(f", eviction_policy={self.q(policy)}")
        line = self.lines[start.end.line - 1]
        wrap = start.start.line == start.end.line and len(line) + added > WIDTH
        stmt_col = len(line) - len(line.lstrip())
        align = arg.column - stmt_col

        def edit(u: cst.Call) -> cst.Call:
            args = list(u.args)
            last = args[-1]
            ws = cst.ParenthesizedWhitespace(first_line=cst.TrailingWhitespace(), empty_lines=[], indent=True,
                                             last_line=cst.SimpleWhitespace(" " * align)) if wrap else cst.SimpleWhitespace(" ")
            args[-1] = last.with_changes(comma=cst.Comma(whitespace_after=ws))
            args.append(kwarg("eviction_policy", self.q(policy)).with_changes(comma=last.comma))
            return u.with_changes(args=args)

        self.replace(call, edit)
