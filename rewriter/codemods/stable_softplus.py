"""Guard inline softplus: `tl.log(1 + tl.exp(x))` -> `tl.where(x < 20.0, tl.log(1 + tl.exp(x)), x)`.

Every inline softplus of the target kernel and its @triton.jit helpers,
written log(1 + exp(x)), log(exp(x) + 1) or log1p(exp(x)) (tl. or tl.math.),
is wrapped in a select that returns x from 20 on, where the two agree to fp32
rounding; the base-2 form log2(1 + exp2(x)) uses 15, as FLA's softplus2 does.
The exponent must be a variable (or an attribute or subscript of one), so the
select reads the same value the formula does.

Refuses: a kernel with no unguarded inline softplus; an exponent that is an
expression (name it first, so it is computed once and compared as written).
"""
from __future__ import annotations

import libcst as cst
import libcst.matchers as m

from patterns.rewriter.edits import PlannedCodemod, code, expr

_TL = m.Name("tl") | m.Attribute(value=m.Name("tl"), attr=m.Name("math"))


def _fn(name: str) -> m.Call:
    return m.Call(func=m.Attribute(value=_TL, attr=m.Name(name)))


def _one(node: cst.BaseExpression) -> bool:
    return isinstance(node, (cst.Integer, cst.Float)) and float(node.value) == 1.0


def _exponent(call: cst.Call) -> tuple[cst.BaseExpression, float] | None:
    """x and the threshold when `call` is log(1 + exp(x)), log(exp(x) + 1), log1p(exp(x)) or log2(1 + exp2(x))."""
    name = call.func.attr.value if isinstance(call.func, cst.Attribute) else ""
    if name not in ("log", "log1p", "log2") or len(call.args) != 1:
        return None
    inner, want = call.args[0].value, "exp2" if name == "log2" else "exp"
    if name != "log1p":
        if not (isinstance(inner, cst.BinaryOperation) and isinstance(inner.operator, cst.Add)):
            return None
        inner = inner.right if _one(inner.left) else inner.left if _one(inner.right) else None
        if inner is None:
            return None
    if not m.matches(inner, _fn(want)) or len(inner.args) != 1:  # type: ignore[union-attr]
        return None
    return inner.args[0].value, 15.0 if name == "log2" else 20.0  # type: ignore[union-attr]


class StableSoftplus(PlannedCodemod):
    PATTERN = "stable_softplus"
    DESCRIPTION = "inline softplus guarded with tl.where(x < 20, ..., x)"

    def plan(self, module: cst.Module) -> None:
        k = self.kernel
        functions = [s for s in module.body if isinstance(s, cst.FunctionDef) and s.name.value in {k.name, *k.helpers}]
        for fn in functions:
            guarded = {id(n) for w in m.findall(fn, _fn("where")) for n in m.findall(w, m.Call())}
            for call in m.findall(fn.body, m.Call(func=m.Attribute(value=_TL))):
                found = _exponent(call)  # type: ignore[arg-type]
                if found is None or id(call) in guarded:
                    continue
                x, limit = found
                if not isinstance(x, (cst.Name, cst.Attribute, cst.Subscript)):
                    self.refuse(f"the softplus on line {self.line(call)} exponentiates an expression (`{code(x)}`): assign it to a name first")
                guard = expr(f"tl.where({code(x)} < {limit}, {code(call)}, {code(x)})")
                self.replace(call, lambda u, g=guard: g)
        if not self._edits:
            self.refuse(f"{k.name} has no unguarded inline softplus log(1 + exp(x))")
