"""Allocate kernel outputs with torch.empty when the kernel writes them: `torch.zeros(...)` -> `torch.empty(...)`.

For every launch argument of the target kernel that the launcher made with
torch.zeros / torch.zeros_like / x.new_zeros, and that the kernel only stores to
(no tl.load, no atomic through that parameter), the allocation becomes
torch.empty / torch.empty_like / x.new_empty: the fill kernel goes away. The
rewrite cannot prove that the stores cover every element; the validation gate
and `patterns check` poison torch.empty with NaN, so a kernel that leaves
elements unwritten fails there instead of passing on zeros.

Refuses: an output the kernel also loads or updates atomically (an accumulator
needs its zeros); a zeros buffer used again in the launcher after the launch
for something other than returning it; a kernel with no such output.
"""
from __future__ import annotations

import re

import libcst as cst
import libcst.matchers as m

from patterns.core.predicates import Subject, launch_arg_source
from patterns.rewriter.edits import PlannedCodemod, code, find_launch

ZEROS = {"zeros": "empty", "zeros_like": "empty_like", "new_zeros": "new_empty"}
_PATTERN = [r"torch\.zeros(_like)?\(|\.new_zeros\("]


class ZerosToEmptyOutputs(PlannedCodemod):
    PATTERN = "zeros_to_empty_outputs"
    DESCRIPTION = "outputs the kernel writes allocated with torch.empty instead of torch.zeros"

    def plan(self, module: cst.Module) -> None:
        k = self.kernel
        subject = Subject(self.facts, k)
        outputs = launch_arg_source(subject, patterns=_PATTERN, stored_only=True)
        if not outputs.ok:
            anywhere = launch_arg_source(subject, patterns=_PATTERN)
            if anywhere.ok:
                name = re.search(r"passes (\w+)", anywhere.reasons[0]).group(1)
                self.refuse(f"{name} (torch.zeros) is loaded or updated atomically by {k.name}: it needs its zeros")
            self.refuse(f"no launch of {k.name} passes a torch.zeros buffer the kernel only writes")
        params = [p.name for p in k.params]
        stored = {p for p in params if self._only_stored(p)}
        for launch in k.launches:
            la = find_launch(self, module, launch.line, params)
            for p, arg in la.by_param.items():
                if p not in stored:
                    continue
                value = arg.value
                target = None
                if isinstance(value, cst.Name):
                    found = la.assigns.get(value.value, [])
                    if len(found) != 1:
                        continue
                    target = found[0][1]
                    self._check_uses(la.host, value.value, launch.line)
                else:
                    target = value
                if isinstance(target, cst.Call) and self._zeros_name(target) is not None:
                    self.replace(target.func, lambda u: self._emptied(u))
        if not self._edits:
            self.refuse(f"no torch.zeros output of {k.name} to replace")

    def _only_stored(self, name: str) -> bool:
        from patterns.core.predicates import _pointer_params

        k = self.kernel
        reads = [c for c in k.calls if (c.name == "tl.load" or c.name.startswith("tl.atomic_")) and c.args
                 and name in _pointer_params(k, c.args[0])]
        writes = [c for c in k.calls if c.name == "tl.store" and c.args and name in _pointer_params(k, c.args[0])]
        return bool(writes) and not reads

    def _check_uses(self, host: cst.FunctionDef, name: str, launch_line: int) -> None:
        """After the launch the buffer may only be returned (a later in-place use would read the zeros)."""
        for stmt in m.findall(host.body, m.SimpleStatementLine()):
            if self.line(stmt) <= launch_line:
                continue
            for small in stmt.body:  # type: ignore[attr-defined]
                uses = [n for n in m.findall(small, m.Name(name))]
                if uses and not m.matches(small, m.Return()):
                    self.refuse(f"{name} is used after the launch (line {self.line(stmt)}): its zeros may be read")

    @staticmethod
    def _zeros_name(call: cst.Call) -> str | None:
        f = call.func
        if isinstance(f, cst.Attribute) and f.attr.value in ZEROS:
            if f.attr.value == "new_zeros" or code(f.value) == "torch":
                return f.attr.value
        return None

    @staticmethod
    def _emptied(func: cst.Attribute) -> cst.Attribute:
        return func.with_changes(attr=cst.Name(ZEROS[func.attr.value]))
