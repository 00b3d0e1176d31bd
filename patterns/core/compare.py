"""The one comparison of an implementation's results with a reference's.

Every place that says "within tolerance" decides it here: a pattern's examples
(patterns.core.examples), the validation gate, the GPU benchmark
(patterns.benchmark) and `serving engine --verify`.

- An element is within `Tolerance(atol, rtol)` when |got - want| <= atol +
  rtol * |want| (torch.allclose's rule); NaN matches NaN, an infinity only the
  same infinity.
- `abs_err` = max |got - want|, `rel_err` = max |got - want| / max |want|
  (scaled by the output's largest value, so a zero in the reference does not
  blow it up). A NaN on one side only makes both NaN.
- Each output is held to its own contract (`output_tolerance`): the tolerance
  of its own dtype where the op declares one, so an fp32 state updated beside a
  bf16 output is held to fp32, not to the bf16 output's looser tolerance.

A *result* is a dict of named outputs (`collect` names what a call returned
after an op's declared outputs and in-place inputs). Comparisons run on the
tensors' own device, in float64: GPU results may be too large to copy.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Union

import torch

from patterns.core.opspec import Inputs, OpSpec, Tolerance

Result = dict[str, Any]
Tolerances = Union[Tolerance, Callable[[str], Tolerance]]


class ResultError(RuntimeError):
    """An implementation returned something that does not fit the op's declared outputs."""


def collect(spec: OpSpec, ret: Any, args: Inputs) -> Result:
    """Name what a call returned; in-place inputs count as outputs (as the caller's tensors hold them).

    A launcher may also return its in-place inputs after the declared outputs
    (`(o, state)` for outputs=("o",), inplace=("state",)); the comparison is
    always made on the caller's tensor, which is what an in-place op promises.
    """
    rets = () if ret is None else tuple(ret) if isinstance(ret, (tuple, list)) else (ret,)
    names = list(spec.outputs)
    if len(rets) == len(names) + len(spec.inplace):
        names += [f"{n} (returned)" for n in spec.inplace]
    if len(rets) != len(names):
        raise ResultError(f"returned {len(rets)} value(s), the op declares outputs {list(spec.outputs)}")
    result = dict(zip(names, rets))
    for name in spec.inplace:
        result[name] = args[name]
        result.pop(f"{name} (returned)", None)
    return {k: v.detach().clone() if isinstance(v, torch.Tensor) else v for k, v in result.items()}


def reference_result(spec: OpSpec, reference: Callable[..., Any], inputs: Inputs) -> Result:
    """The reference's result on clones of `inputs` (its in-place inputs updated on its own copy)."""
    args = {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in inputs.items()}
    return collect(spec, reference(**args), args)


def as_result(out: Any) -> Result:
    """Positional outputs (a tensor or a tuple of them) named `output 0`, `output 1`, ..."""
    outs = tuple(out) if isinstance(out, (tuple, list)) else (out,)
    return {f"output {i}": o for i, o in enumerate(outs)}


def output_tolerance(spec: OpSpec, name: str, want: Any, dtype: str) -> Tolerance:
    """The tolerance output `name` is held to in a run at `dtype`. An input updated in place keeps
    its own dtype's where the spec declares one (an fp32 state in a bf16 run is held to fp32, not to
    the bf16 output's tolerance); a returned output is held to the run's."""
    if name in spec.inplace and isinstance(want, torch.Tensor):
        return spec.tolerance.get(str(want.dtype).removeprefix("torch."), spec.tolerance[dtype])
    return spec.tolerance[dtype]


def tolerances(spec: OpSpec, want: Result, dtype: str) -> Callable[[str], Tolerance]:
    return lambda name: output_tolerance(spec, name.removesuffix(" (returned)"), want.get(name), dtype)


def _tol(tol: Tolerances, name: str) -> Tolerance:
    return tol(name) if callable(tol) else tol


def _f64(t: torch.Tensor, device: torch.device) -> torch.Tensor:
    return t.detach().to(device=device, dtype=torch.float64)


def close(got: torch.Tensor, want: torch.Tensor, tol: Tolerance) -> torch.Tensor:
    """Elementwise: within atol + rtol*|want|, NaN equal to NaN, infinities equal only to themselves."""
    g, w = _f64(got, want.device), _f64(want, want.device)
    diff = (g - w).abs()
    ok = diff <= tol.atol + tol.rtol * w.abs()
    return ok | (g == w) | (g.isnan() & w.isnan())


def errors(got: Result, want: Result) -> tuple[float, float]:
    """(abs_err, rel_err) over all floating outputs; NaN where either side has a NaN the other lacks."""
    worst_abs = worst_rel = 0.0
    for name, w in want.items():
        if not isinstance(w, torch.Tensor) or not (w.is_floating_point() or w.is_complex()):
            continue
        g = got.get(name)
        if not isinstance(g, torch.Tensor) or g.shape != w.shape:
            return math.inf, math.inf
        g, w = _f64(g, w.device), _f64(w, w.device)
        if bool((g.isnan() != w.isnan()).any()):
            return math.nan, math.nan
        both = ~w.isnan()
        diff = (g - w).abs()[both]
        diff = torch.where(diff.isnan(), torch.zeros_like(diff), diff)  # inf - inf of equal sign
        if diff.numel():
            top = float(diff.max())
            worst_abs = max(worst_abs, top)
            worst_rel = max(worst_rel, top / max(float(w[both].abs().max()), 1e-30))
    return worst_abs, worst_rel


@dataclass
class Mismatch:
    output: str
    index: tuple[int, ...]
    got: float
    want: float
    tol: Tolerance | None = None
    note: str = ""

    @property
    def where(self) -> str:
        return f"{self.output}{list(self.index)}" if self.index else self.output

    def describe(self, tol: Tolerance | None = None, against: str = "reference") -> str:
        if self.note:
            return f"{self.where}: {self.note}"
        if math.isnan(self.got) and not math.isnan(self.want):
            return f"{self.where} = NaN vs {against} {self.want:.6g} (an element never written?)"
        text = f"{self.where} = {self.got:.6g} vs {against} {self.want:.6g}"
        tol = tol or self.tol
        if tol is not None:
            text += f" (|err| {abs(self.got - self.want):.3g} > atol {tol.atol:g} + rtol {tol.rtol:g}*|ref|)"
        return text


def first_mismatch(got: Result, want: Result, tol: Tolerances, *, strict_dtype: bool = False) -> Mismatch | None:
    """The first element of any output outside its tolerance (`tol`: one for all outputs, or one per
    output name). Raises ResultError when an output is missing or of another shape (or, with
    `strict_dtype`, another dtype: an output's dtype is part of its contract)."""
    for name, w in want.items():
        g = got.get(name)
        if not isinstance(w, torch.Tensor):
            if g != w:
                return Mismatch(name, (), math.nan, math.nan, note=f"{g!r} != {w!r}")
            continue
        if not isinstance(g, torch.Tensor) or tuple(g.shape) != tuple(w.shape):
            shape = tuple(g.shape) if isinstance(g, torch.Tensor) else type(g).__name__
            raise ResultError(f"output {name}: shape {shape} != reference {tuple(w.shape)}")
        if strict_dtype and g.dtype != w.dtype:
            raise ResultError(f"output {name}: dtype {str(g.dtype).removeprefix('torch.')} != the op's {str(w.dtype).removeprefix('torch.')}")
        t = _tol(tol, name)
        ok = close(g, w, t)
        if not bool(ok.all()):
            idx = tuple(int(i) for i in torch.nonzero(~ok)[0])
            return Mismatch(name, idx, float(g[idx]), float(w[idx]), t)
    return None


def identical(a: Result, b: Result) -> bool:
    """Bitwise equal (NaN equal to NaN): the candidate is a bit-exact rewrite of the baseline."""
    for name, x in a.items():
        y = b.get(name)
        if isinstance(x, torch.Tensor):
            if not isinstance(y, torch.Tensor) or x.shape != y.shape or x.dtype != y.dtype:
                return False
            if not torch.equal(x.nan_to_num(0.5), y.nan_to_num(0.5)) or not torch.equal(x.isnan(), y.isnan()):
                return False
        elif x != y:
            return False
    return True
