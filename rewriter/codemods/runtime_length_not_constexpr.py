"""Make a length that only bounds loops and masks a runtime argument: `T: tl.constexpr` -> `T`.

Every tl.constexpr parameter of the target kernel that is only used as a loop
bound, in masks and in arithmetic (never as a block shape: tl.arange, tl.zeros,
tl.full, tl.static_range, reshape) loses its tl.constexpr annotation, so one
compiled kernel serves every value. With do_not_specialize=true (the default)
the parameter is also named in `@triton.jit(do_not_specialize=[...])`, which stops Triton from
compiling separate variants for values divisible by 16 and for 1. The
arithmetic is unchanged.

Refuses: a kernel whose constexpr sizes all shape blocks (they must stay
constexpr); do_not_specialize on a kernel that already passes it.
"""
from __future__ import annotations

import libcst as cst

from patterns.core.predicates import bound_only_constexprs
from patterns.rewriter.edits import PlannedCodemod, code, expr, kwarg


class RuntimeLengthNotConstexpr(PlannedCodemod):
    PATTERN = "runtime_length_not_constexpr"
    DESCRIPTION = "lengths that only bound loops and masks passed as runtime arguments"

    def plan(self, module: cst.Module) -> None:
        k = self.kernel
        names = [n for n, _ in bound_only_constexprs(k)]
        if not names:
            self.refuse(f"{k.name}: no constexpr used only as a bound (sizes that shape blocks must stay constexpr)")
        for p in self.fn.params.params:
            if p.name.value in names:
                self.replace(p, lambda u: u.with_changes(annotation=None))
        if self.params["do_not_specialize"]:
            dec = next((d for d in self.fn.decorators if code(d.decorator).split("(")[0] in ("triton.jit", "jit")), None)
            if dec is None:
                self.refuse(f"{k.name} has no @triton.jit decorator to pass do_not_specialize to")
            value = expr("[" + ", ".join(self.q(n) for n in names) + "]")
            if isinstance(dec.decorator, cst.Call):
                if any(a.keyword and a.keyword.value == "do_not_specialize" for a in dec.decorator.args):
                    self.refuse(f"{k.name} already passes do_not_specialize")
                self.replace(dec.decorator, lambda u: u.with_changes(args=[*u.args, kwarg("do_not_specialize", value)]))
            else:
                self.replace(dec, lambda u: u.with_changes(decorator=cst.Call(u.decorator, args=[kwarg("do_not_specialize", value)])))
