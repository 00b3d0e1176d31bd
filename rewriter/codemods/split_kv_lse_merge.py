"""Split-KV decoding: split each program's KV loop across NUM_SPLITS programs and merge.

Kernel: a split program axis `i_s` is added after the existing ones; after the
statement that defines the loop's length L, the split's range is computed
(`split_len`, BLOCK-aligned, so the splits' tiles are exactly the unsplit loop's
tiles; `start`, `end`) and the rest of the body runs under `if end > start:`;
the online-softmax loop runs over `range(start, end, BLOCK)`; what the kernel
does after the loop (its epilogue: assignments and output stores, e.g. `acc / l`
and a log-sum-exp output of its own) becomes a store of the normalised partial
`acc / l` to `o_part` and of its log-sum-exp `m + log(l)` to `lse` (exp2-based
kernels: log2; `lse_part` where the kernel already has an `lse`). The output
parameters are replaced by `o_part, lse` and `NUM_SPLITS: tl.constexpr` is
added. A merge kernel is generated (template merge_kernel.py.j2) from the
kernel's own prologue (program ids, offsets, masks, the length L): it rebuilds
the whole range's (m, l, acc) from the partials and runs the epilogue unchanged.
Launcher: shared constexprs get host names, `num_splits` is chosen (about
`programs_per_sm` programs per SM, bounded by max_splits and by the loop length when the host
knows it) or fixed, the partial buffers are allocated, the grid gains the split
axis and the merge kernel is launched after the first.

Refuses: no single top-level `for ... in range(0, L, BLOCK)` online-softmax
loop (a running max initialised to -inf, tl.exp or tl.exp2), an accumulator
that is not a [W] vector, an epilogue that is not straight-line assignments and
tl.store calls or stores more than one [W] row, values other than the softmax
state carried across iterations (advancing pointers), three grid axes, an
autotuned BLOCK, a callable grid, several launches.
"""
from __future__ import annotations

import copy
import re

import libcst as cst
import libcst.matchers as m
from libcst.codemod.visitors import AddImportsVisitor
from libcst.metadata import PositionProvider

from patterns.rewriter.edits import (
    PlannedCodemod, append_pid, code, factor, kwarg, names_in, param_separator, pid_call, pointer_bases, render, render_stmts,
)

NEW_KERNEL_NAMES = ("i_s", "split_len", "start", "end", "o_part", "NUM_SPLITS")
NEW_MERGE_NAMES = ("split_len", "b_lse", "b_r", "b_w", "i_s", "o_part", "NUM_SPLITS")
NEW_HOST_NAMES = ("num_splits", "o_part")
# the partials' log-sum-exp buffer: `lse`, or `lse_part` where the kernel or its launcher has an lse of its own
LSE_NAMES = ("lse", "lse_part")
_NEG_INF = re.compile(r"""-\s*float\(\s*['"]inf['"]\s*\)|float\(\s*['"]-inf['"]\s*\)|-\s*(math|tl)\.inf\b""")
_STORES = ("tl.store",)


def _bound(stmt: cst.CSTNode) -> set[str]:
    """Names a simple assignment statement binds."""
    out: set[str] = set()
    for a in m.findall(stmt, m.Assign() | m.AugAssign()):
        targets = [t.target for t in a.targets] if isinstance(a, cst.Assign) else [a.target]  # type: ignore[attr-defined]
        for t in targets:
            out |= {n.value for n in m.findall(t, m.Name())} if isinstance(t, (cst.Name, cst.Tuple, cst.List)) else set()
    return out


def _unwrap(node: cst.CSTNode) -> cst.CSTNode:
    return node.value if isinstance(node, cst.Element) else node


def _comma() -> cst.Comma:
    return cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))


class SplitKvLseMerge(PlannedCodemod):
    PATTERN = "split_kv_lse_merge"
    DESCRIPTION = "split each program's KV loop across programs and merge the partials by log-sum-exp"

    # -- planning ----------------------------------------------------------------------
    def plan(self, node: cst.Module) -> None:
        k = self.kernel
        fixed = self.params["num_splits"]
        if fixed != "auto" and not (fixed.isdigit() and int(fixed) >= 1):
            self.refuse(f"--param num_splits={fixed}: 'auto' or a positive number of splits")
        self.fixed = None if fixed == "auto" else int(fixed)
        fn = self.fn
        host_names = {n for la in k.launches for n in self.facts.host_assigns.get(la.function, {})}
        host_names |= {p.name.value for s in node.body if isinstance(s, cst.FunctionDef) and s.name.value in {la.function for la in k.launches}
                       for p in s.params.params}
        taken = {p.name for p in k.params} | set(k.assigns) | host_names
        free = [n for n in LSE_NAMES if n not in taken]
        if not free:
            self.refuse(f"{k.name} or its launcher already uses the names {' and '.join(LSE_NAMES)}")
        self.lse = free[0]
        self.module_code = node.code
        self._plan_kernel(fn)
        taken = {p.name for p in k.params} | set(k.assigns)
        clash = [n for n in NEW_KERNEL_NAMES if n in taken]
        if clash:
            self.refuse(f"{k.name} already uses the name {clash[0]}")
        if len(k.launches) != 1:
            self.refuse(f"{k.name} is launched {len(k.launches)}× in this file: the rewrite needs its one launcher")
        hosts = {s.name.value: s for s in node.body if isinstance(s, cst.FunctionDef)}
        la = k.launches[0]
        if la.function not in hosts:
            self.refuse(f"the launch on line {la.line} is not in a top-level function")
        self.host = hosts[la.function]
        self._plan_launch(self.host, la.line)
        self.need_sms = self.fixed is None and "_num_sms" not in hosts
        if self.facts.imports.get("torch") != "torch":
            AddImportsVisitor.add_needed_import(self.context, "torch")

    def _plan_kernel(self, fn: cst.FunctionDef) -> None:
        k = self.kernel
        body = list(fn.body.body)
        # the KV loop: a top-level `for x in range(0, L, BLOCK)` with a running max and exp
        loops = []
        for i, s in enumerate(body):
            if isinstance(s, cst.For) and m.matches(s.iter, m.Call(func=m.Name("range") | m.Attribute(value=m.Name("tl"), attr=m.Name("range")))):
                inner = {c.name for c in k.calls if self.line(s) in c.loops}
                if inner & {"tl.exp", "tl.exp2"} and inner & {"tl.max", "tl.maximum"}:
                    loops.append(i)
        if len(loops) != 1:
            self.refuse(f"no online-softmax running max: expected one top-level KV loop calling tl.max and tl.exp/tl.exp2, found {len(loops)}")
        li = loops[0]
        loop: cst.For = body[li]  # type: ignore[assignment]
        self.loop_line = self.line(loop)
        lp = next(x for x in k.loops if x.line == self.loop_line)
        args = [a for a in loop.iter.args if a.keyword is None]  # type: ignore[attr-defined]
        step = args[2].value if len(args) == 3 else None
        if len(args) == 1:  # range(NT): a loop over tiles
            end_arg, self.block = args[0], None
        elif len(args) >= 2 and m.matches(args[0].value, m.Integer("0")) and (step is None or m.matches(step, m.Integer("1"))):
            end_arg, self.block = args[1], None
        elif len(args) == 3 and m.matches(args[0].value, m.Integer("0")) and isinstance(step, cst.Name) and step.value in k.constexprs:
            end_arg, self.block = args[1], step.value
        else:
            self.refuse(f"the KV loop on line {self.loop_line} is neither `range(0, L, BLOCK)` with a constexpr BLOCK nor `range(0, NT)` over tiles")
        if self.block and k.autotune is not None and any(self.block in cfg or self.block in cfg.get("source", "") for cfg in k.autotune.configs):
            self.refuse(f"{self.block} is chosen by @triton.autotune: the launcher and the merge need its value")
        self.bound = code(end_arg.value)
        bound_names = names_in(end_arg.value)
        if len(args) == 1:
            self.replace(loop.iter, lambda u: u.with_changes(args=[
                cst.Arg(cst.Name("start"), comma=_comma()), u.args[0].with_changes(value=cst.Name("end")), *u.args[1:]]))
        else:
            self.replace(loop.iter, lambda u: u.with_changes(args=[
                u.args[0].with_changes(value=cst.Name("start")), u.args[1].with_changes(value=cst.Name("end")), *u.args[2:]]))
        # the softmax state: m (-inf), l, acc ([W] zeros), all carried through the loop
        before = body[:li]
        inits: dict[str, cst.BaseExpression] = {}
        for s in before:
            for a in m.findall(s, m.Assign(targets=[m.AssignTarget()])):
                tgt, val = a.targets[0].target, a.value  # type: ignore[attr-defined]
                pairs = zip(tgt.elements, val.elements) if isinstance(tgt, cst.Tuple) and isinstance(val, cst.Tuple) else [(tgt, val)]
                for t, v in pairs:
                    t, v = _unwrap(t), _unwrap(v)
                    if isinstance(t, cst.Name):
                        inits[t.value] = v
        carried = [n for n in _carried(loop) if n in inits and n in lp.assigned]
        maxes = [n for n in carried if _NEG_INF.search(code(inits[n]))]
        if len(maxes) != 1:
            self.refuse(f"no online-softmax running max: {'no' if not maxes else 'several'} loop-carried value initialised to -inf")
        self.m = maxes[0]
        vector = m.Call(func=m.Attribute(value=m.Name("tl"), attr=m.Name("zeros")), args=[m.Arg(m.List(elements=[m.Element()])), m.ZeroOrMore()])
        accs = [n for n in carried if m.matches(inits[n], vector)]
        sums = [n for n in carried if _zero_scalar(inits[n])]
        other = sorted(set(carried) - {self.m, *accs[:1], *sums[:1]})
        if other:
            self.refuse(f"{', '.join(other)} {'is' if len(other) == 1 else 'are'} carried across iterations of the KV loop "
                        "besides the softmax state: a split would have to start them at its own offset")
        if len(accs) != 1 or len(sums) != 1:
            self.refuse("the KV loop carries no [W] accumulator (tl.zeros([W])) and running sum (0) beside its running max")
        self.acc, self.l = accs[0], sums[0]
        width = inits[self.acc].args[0].value.elements[0].value  # type: ignore[attr-defined]
        if not isinstance(width, (cst.Name, cst.Integer)) or (isinstance(width, cst.Name) and width.value not in k.constexprs):
            self.refuse(f"the accumulator width `{code(width)}` is not a constexpr parameter or a number")
        self.width = code(width)
        exps = {c.name for c in k.calls if self.loop_line in c.loops and c.name in ("tl.exp", "tl.exp2")}
        if len(exps) != 1:
            self.refuse("the KV loop mixes tl.exp and tl.exp2: cannot tell the base of its log-sum-exp")
        self.exp, self.log = ("tl.exp2", "tl.log2") if exps == {"tl.exp2"} else ("tl.exp", "tl.log")
        # the epilogue after the loop: assignments and output stores, a function of (m, l, acc) and the prologue.
        # The merge rebuilds (m, l, acc) of the whole range from the splits' partials and runs it unchanged.
        stores = [c for c in k.calls if c.name in _STORES or c.name.startswith("tl.atomic_")]
        if any(c.via for c in stores):
            self.refuse(f"a helper of {k.name} stores to memory: only the kernel's own output stores can be split")
        if any(c.line < self.line(loop) or self.loop_line in c.loops for c in stores):
            self.refuse("the kernel stores before or inside the KV loop: only final output stores can be split")
        if any(c.name != "tl.store" for c in stores):
            self.refuse("the kernel writes its output with an atomic: only tl.store outputs can be merged")
        is_store = m.SimpleStatementLine(body=[m.Expr(m.Call(func=m.Attribute(value=m.Name("tl"), attr=m.Name("store"))))])
        epilogue = body[li + 1:]
        for s in epilogue:
            if not (m.matches(s, is_store) or m.matches(s, m.SimpleStatementLine(body=[m.Assign()]))):
                self.refuse(f"line {self.line(s)}: after the KV loop only assignments and tl.store calls can move into the merge, "
                            f"not `{code(s)[:40]}`")
        store_stmts = [s for s in epilogue if m.matches(s, is_store)]
        if not store_stmts:
            self.refuse("the kernel stores nothing after the KV loop")
        pointers = {p.name for p in k.params if not p.constexpr}
        outs: list[str] = []
        for s in store_stmts:
            ptr, _, _ = _store_parts(s)
            base = sorted(pointer_bases(ptr, pointers, k.assigns, calls=False))
            if len(base) != 1:
                self.refuse(f"line {self.line(s)}: cannot tell the output pointer of the store (`{code(ptr)}`)")
            outs += [b for b in base if b not in outs]
        self.outs = [p.name for p in k.params if p.name in outs]  # in signature order
        for out in self.outs:
            uses = [n for n in m.findall(fn.body, m.Name(out)) if not any(self.line(s) <= self.line(n) <= self.end_line(s) for s in store_stmts)]
            if uses:
                self.refuse(f"the output {out} is used outside its store (line {self.line(uses[0])})")
        # the store of the [W] result gives the partial store its columns and mask
        cols = {n for n in k.assigns if re.fullmatch(rf"tl\.arange\(0,\s*{re.escape(self.width)}\)", k.assigns[n][1])}
        wide = [s for s in store_stmts if names_in(_store_parts(s)[0]) & cols]
        if len(wide) > 1:
            self.refuse(f"{len(wide)} stores after the KV loop write [{self.width}] vectors: only one output row can be merged")
        if not wide and len(store_stmts) == 1:
            wide = store_stmts
        if not wide:
            self.refuse(f"no store after the KV loop writes the [{self.width}] result with a tl.arange(0, {self.width}) offset")
        ptr, _, mask = _store_parts(wide[0])
        col = sorted(names_in(ptr) & cols)
        self.col = col[0] if len(col) == 1 else f"tl.arange(0, {self.width})"
        self.mask = mask
        self.epilogue = epilogue
        # program ids: one variable per axis
        axes: dict[int, tuple[cst.SimpleStatementLine, str, bool]] = {}
        for s in body:
            if not m.matches(s, m.SimpleStatementLine(body=[m.Assign(targets=[m.AssignTarget()])])):
                continue
            tgt, val = s.body[0].targets[0].target, s.body[0].value  # type: ignore[attr-defined]
            pairs = list(zip(tgt.elements, val.elements)) if isinstance(tgt, cst.Tuple) and isinstance(val, cst.Tuple) else [(tgt, val)]
            for t, v in pairs:
                t, v = _unwrap(t), _unwrap(v)
                p = pid_call(v)
                if p is not None and isinstance(t, cst.Name):
                    axes[p[0]] = (s, t.value, p[1])
        used = {c.args[0] for c in k.calls_named("tl.program_id") if c.args}
        if len(used) >= 3:
            self.refuse(f"{k.name} already uses 3 program_id axes: no axis left for the KV splits")
        if set(axes) != set(range(len(used))) or {str(a) for a in axes} != used:
            self.refuse(f"{k.name} does not bind each program_id axis to a variable (`i_b = tl.program_id(0)`)")
        self.pids = [axes[a][1] for a in sorted(axes)]
        last_stmt, _, cast = axes[len(axes) - 1]
        self.replace(last_stmt, lambda u, a=len(axes), c=cast: append_pid(u, a, c, "i_s"))
        stems = [p[2:] for p in self.pids if p.startswith("i_")]
        self.row = f"i_{''.join(stems)}s" if len(stems) == len(self.pids) else "i_part"
        if self.row in k.assigns or any(p.name == self.row for p in k.params):
            self.refuse(f"{k.name} already uses the name {self.row}")
        # the merge's prologue: statements the epilogue and L need (the merge supplies m, l and acc)
        state = {self.m, self.l, self.acc}
        epi_names = set().union(*(names_in(s) for s in epilogue)) - set().union(*(_bound(s) for s in epilogue))
        wanted = (epi_names - state) | bound_names | set(self.pids)
        prologue = []
        for s in reversed(body[:li]):
            if _bound(s) & wanted:
                if not m.matches(s, m.SimpleStatementLine(body=[m.Assign() | m.AugAssign()])):
                    self.refuse(f"line {self.line(s)}: the merge needs `{code(s)[:40]}`, which is not a plain assignment")
                prologue.insert(0, s)
                wanted |= names_in(s)
        if wanted & state:
            self.refuse("the output stores depend on the softmax state through statements before the KV loop")
        self.prologue = prologue
        # the split's range goes after the statements the merge shares (program ids, offsets, L):
        # the work after them runs only for a non-empty split
        at = max(body.index(s) for s in [last_stmt, *prologue] if body.index(s) < li)
        self.split_at = at + 1
        params = {p.name: p for p in k.params}
        reads = wanted | {self.block or ""} | ({self.width} if self.width in params else set())
        self.merge_params = [p for p in k.params if p.name in reads]
        taken = {p.name for p in self.merge_params} | {n for s in [*prologue, *epilogue] for n in _bound(s)}
        self.m_new = f"{self.m}_new"
        clash = [n for n in (*NEW_MERGE_NAMES, self.m_new) if n in taken]
        if clash:
            self.refuse(f"the merge kernel would reuse the name {clash[0]}")
        # kernel edits
        pos = lambda n: self.get_metadata(PositionProvider, n)  # noqa: E731
        self.param_comma = param_separator(fn, self.module_code, pos, "NUM_SPLITS: tl.constexpr")
        self.replace(fn.params, self._kernel_params)
        self.replace(fn.body, self._wrap_body)
        self.replace(epilogue[0], self._partial_store)
        for s in epilogue[1:]:
            self.replace(s, lambda u: cst.RemovalSentinel.REMOVE)

    def _plan_launch(self, host: cst.FunctionDef, line: int) -> None:
        k = self.kernel
        call, at = self.launch_in(host, line)
        stmts = list(host.body.body)
        launch_stmt = stmts[at]
        if not m.matches(launch_stmt, m.SimpleStatementLine(body=[m.Expr(m.Call())])):
            self.refuse(f"the launch on line {line} is not a statement of its own at the top of {host.name.value}")
        locals_ = set(self.facts.host_assigns.get(host.name.value, {})) | {p.name.value for p in host.params.params}
        clash = [n for n in NEW_HOST_NAMES if n in locals_]
        if clash:
            self.refuse(f"{host.name.value} already uses the name {clash[0]}")
        grid = call.func.slice[0].slice.value  # type: ignore[union-attr]
        grid_node = grid
        if isinstance(grid, cst.Name):
            found = [a for s in stmts for a in m.findall(s, m.Assign(targets=[m.AssignTarget(m.Name(grid.value))]))]
            if len(found) != 1:
                self.refuse(f"the grid `{grid.value}` is not assigned once in {host.name.value}")
            grid_node = found[0].value  # type: ignore[attr-defined]
        if isinstance(grid_node, cst.Lambda):
            self.refuse(f"the grid of line {line} is a callable: the split count must be known to size the partial buffers")
        if not isinstance(grid_node, cst.Tuple) or len(grid_node.elements) != len(self.pids):
            self.refuse(f"the grid of line {line} (`{code(grid_node)}`) is not a tuple with one element per program axis")
        self.grid_text = code(grid_node)
        grid_elems = [code(e.value) for e in grid_node.elements]
        self.programs = " * ".join(factor(e.value) for e in grid_node.elements)
        self.replace(grid_node, lambda u: u.with_changes(elements=[
            *[e.with_changes(comma=_comma()) for e in u.elements], cst.Element(cst.Name("num_splits"))]))
        # host value of every kernel parameter
        names = [p.name for p in k.params]
        positional = [a for a in call.args if a.keyword is None]
        self.host_value: dict[str, cst.Arg] = {}
        for i, a in enumerate(positional):
            if i < len(names):
                self.host_value[names[i]] = a
        for a in call.args:
            if a.keyword is not None:
                self.host_value[a.keyword.value] = a
        missing = [p.name for p in self.merge_params if p.name not in self.host_value and p.default is None]
        unpassed = missing or [o for o in self.outs if o not in self.host_value]
        if unpassed:
            self.refuse(f"the launch on line {line} does not pass {', '.join(unpassed)}")
        # the extent of axis 1 inside the kernel: a parameter passed the same grid element, else tl.num_programs
        if len(self.pids) == 2:
            same = [p for p in names if p in self.host_value and code(self.host_value[p].value) == grid_elems[1]]
            self.extent1 = same[0] if same else "tl.num_programs(1)"
            if self.extent1 not in [p.name for p in self.merge_params] and same:
                self.merge_params = [p for p in k.params if p.name in {x.name for x in self.merge_params} | {self.extent1}]
        # constexprs the merge shares get host names
        hoisted = []
        for p in self.merge_params:
            arg = self.host_value.get(p.name)
            if p.constexpr and arg is not None and not isinstance(arg.value, cst.Name):
                if p.name in locals_:
                    self.refuse(f"{host.name.value} already has a variable {p.name}, but passes {p.name}={code(arg.value)}")
                hoisted.append((p.name, code(arg.value)))
        self.hoisted = dict(hoisted)
        if self.width in self.host_value and self.width not in self.hoisted and not isinstance(self.host_value[self.width].value, cst.Name):
            self.hoisted[self.width] = code(self.host_value[self.width].value)
        out_arg = self.host_value[self.outs[0]]
        self.out_index = [i for i, a in enumerate(call.args) if any(a is self.host_value[o] for o in self.outs)]
        device = code(out_arg.value) if isinstance(out_arg.value, cst.Name) else next(
            (a.value.value for a in positional if isinstance(a.value, cst.Name) and a.value.value in {p.name.value for p in host.params.params}), None)
        if device is None:
            self.refuse(f"the launch on line {line} passes no tensor to read the device from")
        self.device = f"{device}.device"
        cap = None
        if re.fullmatch(r"\w+", self.bound) and self.bound in names and self.bound not in k.constexprs:
            cap_arg = self.host_value.get(self.bound)
            cap = code(cap_arg.value) if cap_arg is not None else None
        host_width = self._host(self.width)
        block = render_stmts("split_kv_lse_merge", "launcher.py.j2", hoisted=list(self.hoisted.items()), fixed=self.fixed, max_splits=self.params["max_splits"], per_sm=self.params["programs_per_sm"],
                        device=self.device, programs=self.programs, programs_text=self.programs.replace(" ", ""),
                        cap=cap, block=self._host(self.block) if self.block else None, grid=", ".join(grid_elems), width=host_width,
                        lse=self.lse)
        merge_args = ["o_part", self.lse]
        merge_kwargs = []
        for p in self.merge_params:
            if p.name not in self.host_value:
                continue
            value = p.name if p.name in self.hoisted else code(self.host_value[p.name].value)
            if p.constexpr:
                merge_kwargs.append(f"{p.name}={value}")
            else:
                merge_args.append(value)
        merge_kwargs.append("NUM_SPLITS=num_splits")
        self.merge_name = _merge_name(k.name)
        if self.merge_name in {f.name for f in self.facts.kernels} | set(self.facts.host_functions):
            self.refuse(f"the file already defines {self.merge_name}")
        launch = render_stmts("split_kv_lse_merge", "merge_launch.py.j2", name=self.merge_name, grid=self.grid_text, args=merge_args + merge_kwargs)
        self.replace(launch_stmt, lambda u, b=block, after=launch: cst.FlattenSentinel([*b, u, *after]))
        self.replace(call, self._launch_args)

    def _host(self, name: str) -> str:
        """A kernel parameter's value on the host, as text."""
        if name in self.hoisted or name not in self.host_value:
            return name
        return code(self.host_value[name].value)

    # -- kernel edits ------------------------------------------------------------------
    def _kernel_params(self, u: cst.Parameters) -> cst.Parameters:
        items = []
        for p in u.params:
            if p.name.value == self.outs[0]:
                items.append(p.with_changes(name=cst.Name("o_part"), comma=_comma()))
                items.append(p.with_changes(name=cst.Name(self.lse)))
            elif p.name.value in self.outs:  # written by the merge only; its line break stays with the previous parameter
                items[-1] = items[-1].with_changes(comma=p.comma)
            else:
                items.append(p)
        last = items[-1]
        items[-1] = last.with_changes(comma=self.param_comma)
        items.append(cst.Param(cst.Name("NUM_SPLITS"), annotation=cst.Annotation(cst.parse_expression("tl.constexpr"),
                                                                                  whitespace_before_indicator=cst.SimpleWhitespace("")),
                               comma=last.comma))
        return u.with_changes(params=items)

    def _wrap_body(self, u: cst.IndentedBlock) -> cst.IndentedBlock:
        body = list(u.body)
        head, rest = body[:self.split_at], body[self.split_at:]
        split = render_stmts("split_kv_lse_merge", "kernel_split.py.j2", bound=self.bound, block=self.block)
        rest[0] = rest[0].with_changes(leading_lines=[ln for ln in rest[0].leading_lines if ln.comment is not None])
        guard = cst.If(test=cst.parse_expression("end > start"), body=cst.IndentedBlock(rest))
        return u.with_changes(body=[*head, *split, guard])

    def _partial_store(self, u: cst.SimpleStatementLine):
        mask = f", mask={code(self.mask.value)}" if self.mask is not None else ""
        stmts = render_stmts("split_kv_lse_merge", "kernel_store.py.j2", row=self.row, row_expr=self._row_expr(), width=self.width, col=self.col,
                        acc=self.acc, l=self.l, m=self.m, log=self.log, mask=mask, lse=self.lse)
        # blank lines stay; comments travel with the epilogue into the merge
        stmts[0] = stmts[0].with_changes(leading_lines=[ln for ln in u.leading_lines if ln.comment is None])
        return cst.FlattenSentinel(stmts)

    def _row_expr(self) -> str:
        if len(self.pids) == 1:
            return f"{self.pids[0]} * NUM_SPLITS + i_s"
        return f"({self.pids[0]} * {self.extent1} + {self.pids[1]}) * NUM_SPLITS + i_s"

    def _launch_args(self, u: cst.Call) -> cst.Call:
        args = []
        options = ("num_warps", "num_stages", "num_ctas", "maxnreg")
        for i, a in enumerate(u.args):
            key = a.keyword.value if a.keyword else None
            if i == self.out_index[0]:
                if key:
                    args += [kwarg("o_part", "o_part").with_changes(comma=_comma()), kwarg(self.lse, self.lse).with_changes(comma=a.comma)]
                else:
                    args += [a.with_changes(value=cst.Name("o_part"), comma=_comma()), a.with_changes(value=cst.Name(self.lse))]
            elif i in self.out_index:  # written by the merge only
                args[-1] = args[-1].with_changes(comma=a.comma)
            elif key in self.hoisted:
                args.append(a.with_changes(value=cst.Name(key)))
            else:
                args.append(a)
        at = next((i for i, a in enumerate(args) if a.keyword and a.keyword.value in options), len(args))
        if at == len(args):
            last = args[-1]
            args[-1] = last.with_changes(comma=_comma(), whitespace_after_arg=cst.SimpleWhitespace(""))
            args.append(kwarg("NUM_SPLITS", "num_splits").with_changes(comma=last.comma, whitespace_after_arg=last.whitespace_after_arg))
        else:
            args.insert(at, kwarg("NUM_SPLITS", "num_splits").with_changes(comma=_comma()))
        return u.with_changes(args=args)

    # -- module: the merge kernel after the kernel, _num_sms before the launcher ----------
    def _merge_kernel(self) -> cst.FunctionDef:
        runtime = ["o_part", self.lse, *[p.name for p in self.merge_params if not p.constexpr]]
        constexprs = [f"{p.name}: {p.annotation}" + (f" = {p.default}" if p.default else "") for p in self.merge_params if p.constexpr]
        mask = f", mask={code(self.mask.value)}, other=0" if self.mask is not None else ""
        text = render("split_kv_lse_merge", "merge_kernel.py.j2",
            name=self.merge_name, kernel=self.kernel.name, runtime=runtime, constexprs=[*constexprs, "NUM_SPLITS: tl.constexpr"],
            bound=self.bound, block=self.block, m=self.m, l=self.l, acc=self.acc, width=self.width, row=self.row,
            row_expr=self._row_expr(), m_new=self.m_new, exp=self.exp, col=self.col, load_mask=mask, lse=self.lse)
        merge: cst.FunctionDef = cst.parse_module(text).body[0]  # type: ignore[assignment]
        body = []
        for s in merge.body.body:
            if m.matches(s, m.SimpleStatementLine(body=[m.Expr(m.Name("PROLOGUE"))])):
                body += [copy.deepcopy(p).with_changes(leading_lines=[]) for p in self.prologue]
            elif m.matches(s, m.SimpleStatementLine(body=[m.Expr(m.Name("EPILOGUE"))])):
                body += [copy.deepcopy(e).with_changes(leading_lines=[ln for ln in e.leading_lines if ln.comment is not None])
                         for e in self.epilogue]
            else:
                body.append(s)
        return merge.with_changes(body=merge.body.with_changes(body=body), leading_lines=[cst.EmptyLine(), cst.EmptyLine()])

    def leave_Module(self, original: cst.Module, updated: cst.Module) -> cst.Module:
        body = list(updated.body)
        at = next(i for i, s in enumerate(body) if isinstance(s, cst.FunctionDef) and s.name.value == self.kernel.name)
        body.insert(at + 1, self._merge_kernel())
        if self.need_sms:
            h = next(i for i, s in enumerate(body) if isinstance(s, cst.FunctionDef) and s.name.value == self.host.name.value)
            helper = render_stmts("split_kv_lse_merge", "num_sms.py.j2")[0]
            body.insert(h, helper.with_changes(leading_lines=[cst.EmptyLine(), cst.EmptyLine()]))
        return updated.with_changes(body=body)


def _carried(loop: cst.For) -> list[str]:
    """Names the loop body reads before it (re)assigns them: values carried from one iteration to the next."""
    first: dict[str, bool] = {}  # name -> read at its first mention
    for stmt in loop.body.body:
        if m.matches(stmt, m.SimpleStatementLine(body=[m.Assign()])):
            a = stmt.body[0]  # type: ignore[attr-defined]
            reads, binds = names_in(a.value), names_in(a.targets[0].target)  # type: ignore[attr-defined]
        else:
            reads, binds = names_in(stmt), set()
        for n in reads:
            first.setdefault(n, True)
        for n in binds:
            first.setdefault(n, False)
    target = names_in(loop.target)
    return [n for n, read in first.items() if read and n not in target]


def _zero_scalar(expr: cst.BaseExpression) -> bool:
    """`0`, `0.0`, `tl.zeros([], ...)` or `tl.full([], 0, ...)`: the running sum's start."""
    if isinstance(expr, (cst.Integer, cst.Float)):
        return float(expr.value) == 0
    empty = m.Arg(m.List(elements=[]))
    if m.matches(expr, m.Call(func=m.Attribute(value=m.Name("tl"), attr=m.Name("zeros")), args=[empty, m.ZeroOrMore()])):
        return True
    return m.matches(expr, m.Call(func=m.Attribute(value=m.Name("tl"), attr=m.Name("full")), args=[empty, m.Arg(m.Integer("0") | m.Float()), m.ZeroOrMore()])) \
        and float(expr.args[1].value.value) == 0  # type: ignore[attr-defined]


def _store_parts(stmt: cst.SimpleStatementLine) -> tuple[cst.BaseExpression, cst.BaseExpression, cst.Arg | None]:
    """(pointer, value, mask argument) of a `tl.store(...)` statement."""
    call: cst.Call = stmt.body[0].value  # type: ignore[attr-defined]
    pos = [a for a in call.args if a.keyword is None]
    kw = {a.keyword.value: a for a in call.args if a.keyword}
    ptr = pos[0].value if pos else kw["pointer"].value
    value = pos[1].value if len(pos) > 1 else kw["value"].value
    return ptr, value, pos[2] if len(pos) > 2 else kw.get("mask")


def _merge_name(kernel: str) -> str:
    stem = re.sub(r"(_fwd)?(_kernel)?$", "", kernel)
    return f"{stem}_merge_kernel"
