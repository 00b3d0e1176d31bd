"""Calling an implementation the way every check does, and comparing results.

A call gets fresh clones of the inputs (so the caller's copy shows whether the
implementation modified them) with `torch.empty*` poisoned (NaN unless told
otherwise). Its *result* is a dict: the returned values named by `spec.outputs`
and, for ops that update inputs in place, those inputs after the call.

Errors are reported two ways, one definition each:
- `abs_err` = max |got - want|, `rel_err` = max |got - want| / max |want|
  (scaled, so a zero in the reference does not blow it up);
- `first_mismatch` finds the first element outside `atol + rtol * |want|`
  (torch.allclose's rule) and names it, for the local reason.
"""
from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass
from typing import Any, Callable

import torch

from patterns.core.examples import nan_filled_empty
from patterns.validation.monitor import Observed, watch
from patterns.core.opspec import Inputs, OpSpec, Shape, Tolerance

Result = dict[str, Any]


class ResultError(RuntimeError):
    """An implementation returned something that does not fit the op's declared outputs."""


def active_dtypes(spec: OpSpec, device: str) -> tuple[str, ...]:
    """The dtypes checked on this device: `gpu_dtypes` on a GPU where declared, else `dtypes`."""
    if device.startswith("cuda") and spec.gpu_dtypes:
        return tuple(spec.gpu_dtypes)
    return tuple(spec.dtypes)


def clone_inputs(inputs: Inputs) -> Inputs:
    return {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in inputs.items()}


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def collect(spec: OpSpec, ret: Any, args: Inputs) -> Result:
    """Name what a call returned; in-place inputs count as outputs.

    A launcher may also return its in-place inputs after the declared outputs
    (`(o, state)` for outputs=("o",), inplace=("state",)).
    """
    rets = () if ret is None else tuple(ret) if isinstance(ret, (tuple, list)) else (ret,)
    names = list(spec.outputs)
    if len(rets) == len(names) + len(spec.inplace):
        names += list(spec.inplace)
    if len(rets) != len(names):
        raise ResultError(f"returned {len(rets)} value(s), the op declares outputs {list(spec.outputs)}")
    result = dict(zip(names, rets))
    for name in spec.inplace:
        result.setdefault(name, args[name])
    return {k: v.detach().clone() if isinstance(v, torch.Tensor) else v for k, v in result.items()}


def call(
    spec: OpSpec,
    fn: Callable[..., Any],
    inputs: Inputs,
    device: str,
    *,
    fill: float = math.nan,
    observe: Observed | None = None,
) -> tuple[Result, Inputs]:
    """Run `fn(**clones)`; return its result and the clones as they are afterwards.

    With `observe`, only the call itself is watched, not the gate's own cloning.
    """
    args = clone_inputs(inputs)
    with nan_filled_empty(fill):
        with watch(observe) if observe is not None else contextlib.nullcontext():
            ret = fn(**args)
            sync(device)
    return collect(spec, ret, args), args


def call_reference(spec: OpSpec, reference: Callable[..., Any], inputs: Inputs) -> Result:
    args = clone_inputs(inputs)
    return collect(spec, reference(**args), args)


@dataclass
class Mismatch:
    output: str
    index: tuple[int, ...]
    got: float
    want: float

    @property
    def where(self) -> str:
        return f"{self.output}{list(self.index)}"

    def describe(self, tol: Tolerance | None = None, against: str = "reference") -> str:
        text = f"{self.where} = {self.got:.6g} vs {against} {self.want:.6g}"
        if tol is not None:
            text += f" (|err| {abs(self.got - self.want):.3g} > atol {tol.atol:g} + rtol {tol.rtol:g}*|ref|)"
        return text


def _f64(t: torch.Tensor) -> torch.Tensor:
    return t.detach().to("cpu", torch.float64)


def errors(got: Result, want: Result) -> tuple[float, float]:
    """(abs_err, rel_err) over all outputs; NaN where either side has a NaN the other lacks."""
    worst_abs = worst_rel = 0.0
    for name, w in want.items():
        if not isinstance(w, torch.Tensor) or not w.is_floating_point():
            continue
        g, w = _f64(got[name]), _f64(w)
        if g.shape != w.shape:
            return math.inf, math.inf
        if (g.isnan() != w.isnan()).any():
            return math.nan, math.nan
        both = ~w.isnan()
        diff = (g - w).abs()[both]
        diff = torch.where(diff.isnan(), torch.zeros_like(diff), diff)  # inf - inf of equal sign
        if diff.numel():
            scale = max(float(w[both].abs().max()), 1e-30)
            worst_abs = max(worst_abs, float(diff.max()))
            worst_rel = max(worst_rel, float(diff.max()) / scale)
    return worst_abs, worst_rel


def first_mismatch(got: Result, want: Result, tol: Tolerance) -> Mismatch | None:
    for name, w in want.items():
        g = got.get(name)
        if not isinstance(w, torch.Tensor):
            if g != w:
                return Mismatch(name, (), float("nan"), float("nan"))
            continue
        if not isinstance(g, torch.Tensor) or tuple(g.shape) != tuple(w.shape):
            shape = tuple(g.shape) if isinstance(g, torch.Tensor) else type(g).__name__
            raise ResultError(f"output {name}: shape {shape} != reference {tuple(w.shape)}")
        g64, w64 = _f64(g), _f64(w)
        close = torch.isclose(g64, w64, rtol=tol.rtol, atol=tol.atol, equal_nan=True)
        if not bool(close.all()):
            idx = tuple(int(i) for i in torch.nonzero(~close)[0])
            return Mismatch(name, idx, float(g64[idx]), float(w64[idx]))
    return None


def identical(a: Result, b: Result) -> bool:
    """Bitwise equal (NaN equal to NaN): the candidate is a bit-exact rewrite of the baseline."""
    for name, x in a.items():
        y = b.get(name)
        if isinstance(x, torch.Tensor):
            if not isinstance(y, torch.Tensor) or x.shape != y.shape or not torch.equal(x.nan_to_num(0.5), y.nan_to_num(0.5)):
                return False
            if not torch.equal(x.isnan(), y.isnan()):
                return False
        elif x != y:
            return False
    return True


def modified_input(spec: OpSpec, before: Inputs, after: Inputs) -> tuple[str, tuple[int, ...]] | None:
    """The first input (not declared in-place) an implementation changed, and where."""
    for name, b in before.items():
        if name in spec.inplace or name in spec.scratch or not isinstance(b, torch.Tensor):
            continue
        a = after[name]
        same = (a == b) | (a.isnan() & b.isnan()) if b.is_floating_point() else a == b
        if not bool(same.all()):
            return name, tuple(int(i) for i in torch.nonzero(~same)[0])
    return None


def shape_label(shape: Shape, dtype: str | None = None) -> str:
    text = ",".join(f"{k}={v}" for k, v in shape.items())
    return f"{dtype} {text}" if dtype else text
