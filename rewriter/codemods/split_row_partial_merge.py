"""Split a long row's online (max, sum-exp) reduction across programs and merge the partials.

For a kernel with one program per row whose loop `for i in range(0, N, BN)`
keeps a running max b_m (`tl.maximum(b_m, tl.max(...))`) and a running sum
b_l (`b_l * exp(old - new) + tl.sum(...)`), and whose statements after the loop
use only b_m, b_l, the row index and parameters:

- the kernel gets a second program axis i_s over NUM_SPLITS, walks only its
  split of the row (split = cdiv(cdiv(N, NUM_SPLITS), BN)·BN) and stores its
  partial (b_m, b_l) to m_part / l_part [rows, NUM_SPLITS];
- a merge kernel `<kernel>_merge` (one program per row) rebuilds
  b_m = max_s m_s and b_l = Σ_s l_s·exp(m_s - b_m) and runs the original
  statements after the loop;
- the launcher picks num_splits = max(1, min(cdiv(N, BN), cdiv(programs, rows)))
  (param `programs`, default 512 programs in flight), allocates the partials
  and launches both kernels.
Empty splits keep (-inf, 0) and drop out of the merge exactly. The summation
order changes (numerics-changing).

Refuses: a kernel with more than one program axis, no (max, sum-exp) pair
carried by a loop from 0 in steps of a tile, or statements after the loop that
read other values of the kernel.
"""
from __future__ import annotations

import re

import libcst as cst
import libcst.matchers as m

from patterns.rewriter.edits import PlannedCodemod, code, expr, find_launch, insert_args, insert_params, new_param, stmts


class SplitRowPartialMerge(PlannedCodemod):
    PATTERN = "split_row_partial_merge"
    DESCRIPTION = "row reduction split across programs with a (max, sum-exp) merge"

    def plan(self, module: cst.Module) -> None:
        k = self.kernel
        pids = [v for v, (_, e) in k.assigns.items() if "tl.program_id" in e]
        if len(pids) != 1 or len({a for v in pids for a in k.pid_deps.get(v, [])}) != 1:
            self.refuse(f"{k.name} has more than one program axis: the split needs the second")
        row = pids[0]
        found = None
        for lp in k.loops:
            mx = next((v for v in lp.assigned if re.search(rf"tl\.maximum\(\s*{v}\s*,\s*tl\.max\(", k.assigns.get(v, (0, ""))[1])), None)
            sm = next((v for v in lp.assigned if re.search(rf"^\s*{v}\s*\*\s*tl\.exp\(.*\+\s*tl\.sum\(", k.assigns.get(v, (0, ""))[1])), None)
            if mx and sm:
                found = (lp, mx, sm)
                break
        if found is None:
            self.refuse(f"{k.name} carries no running max and sum of exponentials across its loop")
        lp, b_m, b_l = found
        if len(lp.args) != 3 or lp.args[0].strip() != "0" or lp.depth != 0:
            self.refuse(f"the loop on line {lp.line} (`{lp.iter}`) does not run from 0 in steps of a tile")
        end, step = lp.args[1].strip(), lp.args[2].strip()
        params = [p.name for p in k.params]
        loop = next(f for f in self.fn.body.body if isinstance(f, cst.For) and self.line(f) == lp.line)
        body = list(self.fn.body.body)
        tail = body[body.index(loop) + 1:]
        allowed = {b_m, b_l, row, "tl", *params}
        for s in tail:
            used = {n.value for n in m.findall(s, m.Name())} - {n.value for n in m.findall(s, m.Attribute(attr=m.Name()))
                                                                  for n in [n.attr]}  # type: ignore[attr-defined]
            extra = sorted(used - allowed - set(dir(__builtins__)) - {"float"})
            if extra:
                self.refuse(f"the statements after the loop read {', '.join(extra)}: only {b_m}, {b_l}, {row} and parameters move to the merge")
        # kernel: second axis, a split of the row, partial statistics
        pid_stmt = next(s for s in body if self.line(s) == k.assigns[row][0])
        self.insert_after(pid_stmt, stmts("i_s = tl.program_id(1)\n"))
        self.insert_before(loop, stmts(f"split = tl.cdiv(tl.cdiv({end}, NUM_SPLITS), {step}) * {step}\n"))
        call = loop.iter  # type: ignore[attr-defined]
        self.replace(call, lambda u: u.with_changes(args=[
            u.args[0].with_changes(value=expr("i_s * split")),
            u.args[1].with_changes(value=expr(f"tl.minimum(i_s * split + split, {end})")), u.args[2]]))
        stores = stmts(f"# this split's partial statistics; {k.name}_merge combines them\n"
                       f"tl.store(m_part + {row} * NUM_SPLITS + i_s, {b_m})\ntl.store(l_part + {row} * NUM_SPLITS + i_s, {b_l})\n")
        for i, s in enumerate(tail):
            self.remove(s)
        self.insert_after(tail[-1] if tail else loop, stores)
        first_cx = next((i for i, p in enumerate(k.params) if p.constexpr), len(params))
        self.replace(self.fn, lambda u: insert_params(u, [(first_cx, new_param("m_part")), (first_cx, new_param("l_part")),
                                                         (first_cx, new_param("NUM_SPLITS"))]))
        # merge kernel: the original epilogue after rebuilding the statistics
        used_params = [p for p in params if any(m.findall(s, m.Name(p)) for s in tail)]
        pid_code = code(pid_stmt)
        tail_code = "".join("    " + ln + "\n" for s in tail for ln in cst.Module([s]).code.strip("\n").splitlines())
        merge = (f"\n\n@triton.jit\ndef {k.name}_merge(m_part, l_part, {''.join(p + ', ' for p in used_params)}NUM_SPLITS, BS: tl.constexpr):\n"
                 f"    {pid_code}\n    o_s = tl.arange(0, BS)\n"
                 f"    b_ms = tl.load(m_part + {row} * NUM_SPLITS + o_s, mask=o_s < NUM_SPLITS, other=float({self.q('-inf')}))\n"
                 f"    b_ls = tl.load(l_part + {row} * NUM_SPLITS + o_s, mask=o_s < NUM_SPLITS, other=0.0)\n"
                 f"    {b_m} = tl.max(b_ms, 0)\n"
                 f"    # empty splits hold (-inf, 0) and add nothing\n"
                 f"    {b_l} = tl.sum(b_ls * tl.exp(b_ms - {b_m}), 0)\n{tail_code}")
        top = next(s for s in module.body if s is self.fn)
        self.insert_after(top, stmts(merge))
        # launcher
        for launch in k.launches:
            la = find_launch(self, module, launch.line, params)
            grid = la.grid
            rows = code(grid.elements[0].value) if isinstance(grid, cst.Tuple) and len(grid.elements) == 1 else None
            if rows is None:
                self.refuse(f"the launch on line {launch.line} has no one-axis tuple grid `(rows,)`")
            host = {p: code(la.value(p)) for p in params if la.value(p) is not None}
            n_host, bn_host = host.get(end, end), host.get(step, step)
            first = next((code(a.value) for a in la.call.args if a.keyword is None), "None")
            programs = self.params["programs"]
            self.insert_before(la.stmt, stmts(
                f"# split each row until about {programs} programs are in flight\n"
                f"num_splits = max(1, min(triton.cdiv({n_host}, {bn_host}), triton.cdiv({programs}, {rows})))\n"
                f"m_part = torch.empty({rows}, num_splits, dtype=torch.float32, device={first}.device)\n"
                f"l_part = torch.empty_like(m_part)\n"))
            positional = sum(1 for a in la.call.args if a.keyword is None)
            at = min(first_cx, positional)
            self.replace(grid, lambda u, r=rows: expr(f"({r}, num_splits)"))
            self.replace(la.call, lambda u, at=at: insert_args(u, [(at, cst.Arg(expr("m_part"))), (at, cst.Arg(expr("l_part"))),
                                                                  (at, cst.Arg(expr("num_splits")))]))
            margs = "".join(host.get(p, p) + ", " for p in used_params)
            self.insert_after(la.stmt, stmts(
                f"{k.name}_merge[({rows},)](m_part, l_part, {margs}num_splits, BS=triton.next_power_of_2(num_splits))\n"))
