"""Let a recurrent kernel start from an initial state and hand its final state on.

The kernel's carried 2-D state (`b_h = tl.zeros([BK, BV], ...)` before the
loop, decayed and updated in it) gains two optional pointers and two flags, as
FLA's fused_recurrent kernels have them:

    if USE_INITIAL_STATE:
        b_h += tl.load(h0 + i_bh * K * V + o_k[:, None] * V + o_v[None, :], mask=...)
    ...loop...
    if STORE_FINAL_STATE:
        tl.store(ht + i_bh * K * V + o_k[:, None] * V + o_v[None, :], b_h, mask=...)

The launcher takes `initial_state=None, output_final_state=False`, allocates the
[N, K, V] fp32 final state only when asked and returns (o, final_state) then;
with the defaults its behaviour and results are unchanged (exact).

Refuses: no state carried across a loop from tl.zeros; a state that is not a
2-D tile indexed by `tl.arange` offsets; a grid of more than one program axis
(the state's row in [N, K, V] would not be one program index); a launcher
with more than one return.
"""
from __future__ import annotations

import re

import libcst as cst
import libcst.matchers as m

from patterns.rewriter.edits import PlannedCodemod, code, expr, find_launch, insert_args, insert_params, kwarg, new_param, stmts


class RecurrentStateInOut(PlannedCodemod):
    PATTERN = "recurrent_state_in_out"
    DESCRIPTION = "optional initial state in and final state out"

    def plan(self, module: cst.Module) -> None:
        k = self.kernel
        state = shape = None
        for lp in k.loops:
            for var in lp.assigned:
                init = next((b for b in self.body.bindings.get(var, []) if not b.aug and isinstance(b.value, cst.Call)
                             and code(b.value.func) == "tl.zeros" and self.line(b.stmt) < lp.line), None)
                if init is None or var == lp.target:
                    continue
                expr_text = k.assigns.get(var, (0, ""))[1]
                if re.search(rf"\b{var}\s*\*|\*\s*{var}\b", expr_text) or "multiply" in {e.partition(":")[0] for e in k.accumulates.get(var, [])}:
                    state, shape, loop_line, init_stmt = var, init.value.args[0].value, lp.line, init.line  # type: ignore[attr-defined]
                    break
            if state:
                break
        if state is None:
            self.refuse(f"{k.name} carries no state from tl.zeros across a loop")
        dims = [code(e.value) for e in shape.elements] if isinstance(shape, (cst.List, cst.Tuple)) else []
        if len(dims) != 2:
            self.refuse(f"the carried state {state} is not a 2-D tile (tl.zeros({code(shape)}))")
        offs, sizes, masks = [], [], []
        for d in dims:
            o = next((v for v, (_, e) in k.assigns.items() if re.fullmatch(rf"tl\.arange\(\s*0\s*,\s*{d}\s*\)", e.strip())), None)
            if o is None:
                self.refuse(f"no offsets `tl.arange(0, {d})` for the state's dimension {d}")
            mk = next((v for v, (_, e) in k.assigns.items() if re.fullmatch(rf"{o}\s*<\s*(\w+)", e.strip())), None)
            offs.append(o)
            sizes.append(re.fullmatch(rf"{o}\s*<\s*(\w+)", k.assigns[mk][1].strip()).group(1) if mk else d)
            masks.append(mk)
        pids = [v for v, (_, e) in k.assigns.items() if "tl.program_id" in e]
        axes = {a for v in pids for a in k.pid_deps.get(v, [])}
        if len(pids) != 1 or len(axes) != 1:
            self.refuse(f"{k.name} has {len(axes)} program axes: the state's row in [N, {sizes[0]}, {sizes[1]}] is not one program index")
        if not k.launches:
            self.refuse(f"no launch of {k.name} in this file")
        i_n = pids[0]
        addr = f"{i_n} * {sizes[0]} * {sizes[1]} + {offs[0]}[:, None] * {sizes[1]} + {offs[1]}[None, :]"
        mask = f", mask={masks[0]}[:, None] & {masks[1]}[None, :]" if all(masks) else ""
        self.insert_after(init_stmt, stmts(f"if USE_INITIAL_STATE:\n    {state} += tl.load(h0 + {addr}{mask}, other=0.0).to(tl.float32)\n"))
        loop = next(f for f in m.findall(self.fn.body, m.For() | m.While()) if self.line(f) == loop_line)
        self.insert_after(loop, stmts(f"if STORE_FINAL_STATE:\n    tl.store(ht + {addr}, {state}{mask})\n"))
        params = [p.name for p in k.params]
        first_cx = next((i for i, p in enumerate(k.params) if p.constexpr), len(params))
        self.replace(self.fn, lambda u: insert_params(u, [(first_cx, new_param("h0")), (first_cx, new_param("ht")),
                                                         (len(params), new_param("USE_INITIAL_STATE", "tl.constexpr")),
                                                         (len(params), new_param("STORE_FINAL_STATE", "tl.constexpr"))]))
        for launch in k.launches:
            la = find_launch(self, module, launch.line, params)
            grid = la.grid.elements[0].value if isinstance(la.grid, cst.Tuple) else la.grid  # type: ignore[attr-defined]
            size = [code(la.value(s)) if la.value(s) is not None else s for s in sizes]
            first = next((code(a.value) for a in la.call.args if a.keyword is None), "None")
            returns = list(m.findall(la.host.body, m.Return()))
            if len(returns) != 1 or returns[0].value is None:
                self.refuse(f"{la.host.name.value} does not end in one return of the output")
            ret = returns[0]
            positional = sum(1 for a in la.call.args if a.keyword is None)
            at = min(first_cx, positional)
            self.replace(la.call, lambda u, at=at: insert_args(u, [(at, cst.Arg(expr("initial_state"))), (at, cst.Arg(expr("final_state"))),
                                                                  (len(u.args), kwarg("USE_INITIAL_STATE", "initial_state is not None")),
                                                                  (len(u.args), kwarg("STORE_FINAL_STATE", "output_final_state"))]))
            self.keep_width(la.stmt)
            self.insert_before(la.stmt, stmts(
                f"final_state = torch.empty({code(grid)}, {size[0]}, {size[1]}, dtype=torch.float32, device={first}.device) "
                f"if output_final_state else None\n"))
            out = code(ret.value)
            self.replace(ret, lambda u, out=out: u.with_changes(value=expr(f"({out}, final_state) if output_final_state else {out}")))
            opt = [cst.Param(cst.Name("initial_state"), annotation=cst.Annotation(expr("torch.Tensor | None")), default=expr("None"),
                             equal=cst.AssignEqual(cst.SimpleWhitespace(" "), cst.SimpleWhitespace(" "))),
                   cst.Param(cst.Name("output_final_state"), annotation=cst.Annotation(expr("bool")), default=expr("False"),
                             equal=cst.AssignEqual(cst.SimpleWhitespace(" "), cst.SimpleWhitespace(" ")))]
            n_host = len(la.host.params.params)
            self.replace(la.host, lambda u, opt=opt, n=n_host: insert_params(u, [(n, p) for p in opt]))
