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


class CacheEvictionHints(PlannedCodemod):
    PATTERN = "cache_eviction_hints"
    DESCRIPTION = "eviction_policy evict_first on streamed tile loads, evict_last on loads shared across programs"

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
