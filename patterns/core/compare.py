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
- Precision (`precision_mismatch`): beside the per-dtype tolerance, each
  element is held to a float64 reference (`precise_result`: the reference on
  the inputs upcast) within the bound the op's declared accumulation dtype
  allows: 2 u_out |ref| (the output's own rounding, u_out the unit roundoff of
  its dtype, counted as one whole step: a cast may round toward zero, as the
  Triton 3.9 interpreter's fp32 -> bf16 cast does (triton/runtime/
  interpreter.py, InterpreterBuilder.cast_impl) and `fp_downcast_rounding=
  "rtz"` asks) + 2 n u_acc max|ref| (n terms summed at the accumulation's unit
  roundoff, the first-order bound gamma_n = n u with the output's largest
  value as the terms' scale, once for the candidate and once for a reference
  that may itself sum in fp32) + the output dtype's smallest subnormal step. A per-dtype tolerance loose enough for bf16 outputs also admits a sum
  accumulated in bf16; this bound, for fp32 accumulation, does not.

A *result* is a dict of named outputs (`collect` names what a call returned
after an op's declared outputs and in-place inputs). Comparisons run on the
tensors' own device, in float64: GPU results may be too large to copy.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Union

import torch

from patterns.core.opspec import ACCUMULATION, Inputs, OpSpec, Tolerance

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


def precise_result(spec: OpSpec, reference: Callable[..., Any], inputs: Inputs) -> Result | None:
    """The reference's result on `inputs` with every floating tensor upcast to float64 (its in-place
    inputs updated on its own float64 copy); None when the reference cannot run in float64."""
    args = {k: v.to(torch.float64) if isinstance(v, torch.Tensor) and v.is_floating_point() else v.clone() if isinstance(v, torch.Tensor) else v
            for k, v in inputs.items()}
    try:
        return collect(spec, reference(**args), args)
    except Exception:  # noqa: BLE001 - a reference written for one dtype: the precision check is then not made
        return None


def unit_roundoff(dtype: torch.dtype) -> float:
    """Half the spacing of floats at 1.0 (2^-8 for bfloat16, 2^-24 for float32); 0 for exact types."""
    return torch.finfo(dtype).eps / 2 if dtype.is_floating_point else 0.0


def precision_bound(want: torch.Tensor, out_dtype: torch.dtype, accumulation: str, terms: int) -> torch.Tensor:
    """Per element of the float64 reference `want`: how far a result in `out_dtype`, summing `terms`
    terms in `accumulation`, may be from it (the module doc gives the terms)."""
    w = want.abs()
    finite = w[w.isfinite()]
    scale = float(finite.max()) if finite.numel() else 0.0
    u_out = unit_roundoff(out_dtype)
    subnormal = torch.finfo(out_dtype).tiny * 2 * u_out if out_dtype.is_floating_point else 0.0
    return 2 * u_out * w + (1 + 2 * u_out) * 2 * terms * ACCUMULATION[accumulation] * scale + subnormal


def precision_mismatch(got: Result, precise: Result, want: Result, accumulation: str, terms: int, run_dtype: str) -> tuple[float, Mismatch | None]:
    """(the worst error as a fraction of the bound over all floating outputs, the worst element when
    it is beyond the bound). Each output's rounding is its dtype's as returned or as the reference
    at the run's dtype (`want`) returns it, whichever is coarser (a reference may return an fp32
    output that the op returns in bf16); elements where the float64 reference is not finite are
    left to the per-dtype check."""
    worst, at = 0.0, None
    for name, p in precise.items():
        w, g = want.get(name), got.get(name)
        if not all(isinstance(t, torch.Tensor) and t.is_floating_point() for t in (p, w, g)) or g.shape != p.shape:
            continue
        p64 = _f64(p, p.device)
        out_dtype = max((w.dtype, g.dtype), key=unit_roundoff)
        bound = precision_bound(p64, out_dtype, accumulation, terms)
        err = (_f64(g, p.device) - p64).abs()
        ratio = torch.where(p64.isfinite(), err / bound.clamp_min(1e-300), torch.zeros_like(err))
        ratio = torch.where(ratio.isnan(), torch.full_like(ratio, math.inf), ratio)  # a NaN where the reference is finite
        if ratio.numel() and float(ratio.max()) > worst:
            idx = tuple(int(i) for i in torch.nonzero(ratio == ratio.max())[0])
            worst, at = float(ratio.max()), (name, idx, out_dtype, float(bound[idx]))
    if at is None or worst <= 1.0:
        return worst, None
    name, idx, out_dtype, bound = at
    g, p = float(got[name][idx]), float(precise[name][idx])
    out = str(out_dtype).removeprefix("torch.")
    narrower = ACCUMULATION.get(run_dtype, 0.0) > ACCUMULATION[accumulation]
    like = f"consistent with accumulating in {run_dtype}" if narrower else "consistent with a narrower accumulation or rounded operands"
    note = (f"{g:.6g} vs float64 reference {p:.6g}: |err| {abs(g - p):.3g} is {worst:.3g}x what {accumulation} accumulation allows "
            f"({bound:.3g}: {out} rounding + {terms} terms at {accumulation}), {like}")
    return worst, Mismatch(name, idx, g, p, note=note)


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
