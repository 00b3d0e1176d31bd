"""Pass a device scalar to the kernel instead of its `.item()`: the launch stops waiting for the GPU.

For every launch argument of the target kernel written `t.item()`, the launch
passes `t` itself, and the kernel loads the value once at the top of its body,
`b_<p> = tl.load(<p>)` (`<p>_val` when the kernel's names do not start with
`b_`), using it wherever it used the parameter. The value keeps the tensor's
dtype: a Python float from .item() was fp32 in the kernel, so a half-precision
tensor now arrives in half precision (cast it if that matters).

Refuses: a kernel with no launch argument read back with .item(); a parameter
that is a tl.constexpr (a compile-time value cannot come from the device); a
read-back value the launcher also uses for something else (a grid, a
condition: see cuda_graph_safe_grid).
"""
from __future__ import annotations

import libcst as cst
import libcst.matchers as m

from patterns.rewriter.edits import PlannedCodemod, find_launch, stmts

_ITEM = m.Call(func=m.Attribute(attr=m.Name("item")), args=[])


class DeviceScalarByPointer(PlannedCodemod):
    PATTERN = "device_scalar_by_pointer"
    DESCRIPTION = "device scalars passed by pointer and loaded in the kernel instead of .item()"

    def plan(self, module: cst.Module) -> None:
        k = self.kernel
        params = [p.name for p in k.params]
        targets: dict[str, cst.Arg] = {}
        for launch in k.launches:
            la = find_launch(self, module, launch.line, params)
            for p, arg in la.by_param.items():
                if m.matches(arg.value, _ITEM):
                    if k.param(p).constexpr:  # type: ignore[union-attr]
                        self.refuse(f"{p} is a tl.constexpr: a compile-time value cannot be loaded on the device")
                    targets.setdefault(p, arg)
                    self.replace(arg, lambda u: u.with_changes(value=u.value.func.value))  # type: ignore[attr-defined]
                elif isinstance(arg.value, cst.Name) and any(m.matches(v, _ITEM) for _, v in la.assigns.get(arg.value.value, [])):
                    self.refuse(f"{p} is read back into `{arg.value.value}` above the launch: pass the tensor and drop the variable by hand")
        if not targets:
            self.refuse(f"no launch of {k.name} passes a value read back with .item()")
        prefix = "b_" if sum(v.startswith("b_") for v in k.assigns) * 2 >= len(k.assigns) else ""
        taken = set(k.assigns) | set(params)
        loads = []
        for p in targets:
            name = f"b_{p}" if prefix else f"{p}_val"
            while name in taken:
                name += "_"
            taken.add(name)
            loads.append(f"{name} = tl.load({p})\n")
            self._rename(p, name)
        first = self.fn.body.body[0]  # type: ignore[attr-defined]
        if m.matches(first, m.SimpleStatementLine(body=[m.Expr(m.SimpleString() | m.ConcatenatedString())])):
            self.insert_after(first, stmts("".join(loads)))
        else:
            self.insert_before(first, stmts("".join(loads)))

    def _rename(self, param: str, name: str) -> None:
        """Every read of the parameter in the kernel body (keywords and attribute names are not reads)."""
        skip = {id(a.keyword) for a in m.findall(self.fn.body, m.Arg()) if a.keyword is not None}  # type: ignore[attr-defined]
        skip |= {id(a.attr) for a in m.findall(self.fn.body, m.Attribute())}  # type: ignore[attr-defined]
        for n in m.findall(self.fn.body, m.Name(param)):
            if id(n) not in skip:
                self.replace(n, lambda u, new=name: u.with_changes(value=new))
