"""Tile reuse through L2: what a tiled `tl.dot` kernel really reads from DRAM.

Counting every program's loads as DRAM traffic calls a 4096³ bf16 GEMM
"memory-bound, 2.2 GB": each A row-panel is read by every program of its tile
row, each B column-panel by every program of its tile column. Programs that
run at the same time (one wave) and read the same panel share it in L2, so a
wave costs its *distinct* panels: with `r` tile rows and `c` tile columns in
the wave, r·A_panel + c·B_panel instead of W·(A_panel + B_panel).

Which tiles a wave holds depends on the grid order:
- row-major fold (`pid_m = pid // num_pid_n`): a wave of W programs covers
  ceil(W / num_pid_n) rows and min(W, num_pid_n) columns;
- grouped (`GROUP_M`, Triton's matmul tutorial): GROUP_M rows, ceil(W / GROUP_M)
  columns;
- a 2-D/3-D grid runs axis 0 fastest: a load that does not depend on axis a is
  shared by the programs along a (attention: K/V tiles shared by the query
  blocks of one head).
Reuse holds while the wave's panels fit in L2 (size from patterns.core.hardware);
beyond it, the reuse falls off in proportion.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

from patterns.core.facts_types import CallSite, KernelFacts
from patterns.retriever.launcher import Unknown, safe_eval


@dataclass
class Reuse:
    dram_bytes: float  # per launch, the tiled operands only
    no_reuse_bytes: float  # the same operands counted per program
    order: str  # "row-major", "grouped (GROUP_M=8)", "grid axes"
    rows: int  # tiles of the first operand distinct per wave
    cols: int
    wave: int
    fits_l2: bool

    @property
    def saved(self) -> float:
        return self.no_reuse_bytes - self.dram_bytes


def kernel_env(kernel: KernelFacts, binds: dict) -> dict:
    """The kernel's own scalar assignments (num_pid_n = tl.cdiv(N, BLOCK_N)) evaluated over the binds."""
    env = dict(binds)
    for var, (_, expr) in sorted(kernel.assigns.items(), key=lambda kv: kv[1][0]):
        if var in env or "program_id" in expr or "tl.load" in expr:
            continue
        try:
            v = safe_eval(expr, env)
        except Unknown:
            continue
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            env[var] = v
    return env


def _operand_load(kernel: KernelFacts, expr: str, depth: int = 0) -> CallSite | None:
    """The in-loop load a dot operand comes from: `a`, `b.to(tl.int8) - zero`, `tl.trans(b)`,
    through the variables it is computed from (`b = (b_packed & m) >> s`)."""
    for name in re.findall(r"(?<![\w.])([A-Za-z_]\w*)\b", expr):
        if name in ("tl", "triton"):
            continue
        defs = [a for a in (kernel.assigns.get(name), kernel.first_assigns.get(name)) if a]
        found = next((c for c in kernel.calls if c.name == "tl.load" and c.line in {a[0] for a in defs} and c.in_loop), None)
        if found is not None:
            return found
        if depth < 4:
            for _, text in defs:
                if "tl.load" not in text and text != expr:
                    inner = _operand_load(kernel, text, depth + 1)
                    if inner is not None:
                        return inner
    return None


def group_size(kernel: KernelFacts, binds: dict) -> int | None:
    """GROUP_M of a grouped ordering, when the program-id arithmetic uses one."""
    for var, (_, expr) in kernel.assigns.items():
        for name in re.findall(r"\b(\w*GROUP\w*)\b", expr, re.I):
            if name in binds and isinstance(binds[name], int):
                return int(binds[name])
    return None


def _fold(kernel: KernelFacts, env: dict) -> tuple[str, str, int] | None:
    """(slow var, fast var, tiles along the fast part) of `pid_m = pid // n; pid_n = pid % n`."""
    pid_vars = {v for v, (_, e) in kernel.assigns.items() if re.fullmatch(r"\s*tl\.program_id\((0|axis=0)\)\s*", e)}
    slow = fast = None
    n = None
    for var, (_, expr) in kernel.assigns.items():
        for p in pid_vars:
            m = re.fullmatch(rf"\s*{p}\s*(//|%)\s*(.+)", expr)
            if m:
                try:
                    n = int(safe_eval(m.group(2), env))
                except (Unknown, TypeError, ValueError):
                    continue
                if m.group(1) == "//":
                    slow = var
                else:
                    fast = var
    if slow and fast and n:
        return slow, fast, n
    return None


# programs of one wave run their K loops roughly together; they drift apart by some steps, so the
# panels live in L2 over a window of about this many k-steps, not over the whole K extent
DRIFT_STEPS = 16


def l2_reuse(kernel: KernelFacts, binds: dict, load_bytes: dict[int, float], programs: int, wave: int,
             grid: tuple[int, ...] | None, l2_bytes: float, group: int | None = None, trips: int | None = None) -> Reuse | None:
    """DRAM bytes of the tiled operands of the kernel's first in-loop tl.dot; None when it cannot tell.

    `load_bytes`: bytes per program of each load, by line (loop trips included);
    `group`: model a grouped ordering of that GROUP_M instead of the kernel's own.
    """
    dot = next((c for c in kernel.calls if c.name in ("tl.dot", "tl.dot_scaled") and c.in_loop and len(c.args) >= 2), None)
    if dot is None or programs <= 1:
        return None
    # tl.dot_scaled(lhs, lhs_scale, lhs_format, rhs, ...): the second operand is the fourth argument
    b_arg = dot.args[3] if dot.name == "tl.dot_scaled" and len(dot.args) >= 4 else dot.args[1]
    la, lb = _operand_load(kernel, dot.args[0]), _operand_load(kernel, b_arg)
    if la is None or lb is None or la.line not in load_bytes or lb.line not in load_bytes:
        return None
    a_b, b_b = load_bytes[la.line], load_bytes[lb.line]
    w = max(1, min(wave, programs))
    env = kernel_env(kernel, binds)
    own_group = group_size(kernel, binds)
    g = group or own_group
    fold = _fold(kernel, env)
    if fold is not None or g:
        if fold is not None:
            slow, fast, n_fast = fold
            # which operand rides on the slow part: it is shared along a tile row
            a_slow = slow in la.depends_on and fast not in la.depends_on
            n_slow = max(1, math.ceil(programs / n_fast))
        else:
            a_slow, n_fast, n_slow = True, max(1, round(math.sqrt(programs))), max(1, round(math.sqrt(programs)))
        if g:
            m_tiles = n_slow if a_slow else n_fast
            rows = min(g, m_tiles)
            cols = min(math.ceil(w / rows), programs // max(rows, 1) or 1)
            order = f"grouped (GROUP_M={g})"
        else:
            rows, cols = math.ceil(w / n_fast), min(w, n_fast)
            order = "row-major"
        ra, rb = (rows, cols) if a_slow else (cols, rows)
    elif grid and len(grid) >= 2:
        def distinct(axes: list[int]) -> int:
            out, span = 1, 1
            for ax, size in enumerate(grid):
                seen = min(size, math.ceil(w / span))
                if ax in axes:
                    out *= seen
                span *= size
            return out

        ra, rb = distinct(la.pid_axes), distinct(lb.pid_axes)
        order, rows, cols = "grid axes", ra, rb
    else:
        return None
    waves = programs / w
    no_reuse = programs * (a_b + b_b)
    footprint = ra * a_b + rb * b_b
    reused = waves * footprint
    window = footprint * min(1.0, DRIFT_STEPS / trips) if trips else footprint
    fits = window <= l2_bytes
    if not fits:  # panels that do not fit are re-read: reuse falls off with the overflow
        reused += (no_reuse - reused) * (1 - l2_bytes / window)
    return Reuse(dram_bytes=min(reused, no_reuse), no_reuse_bytes=no_reuse, order=order, rows=rows, cols=cols, wave=w, fits_l2=fits)
