"""Calling an implementation the way every check does.

A call gets fresh clones of the inputs (so the caller's copy shows whether the
implementation modified them) with `torch.empty*` poisoned (NaN unless told
otherwise), and runs where the implementation lives (the gate's child process
for a candidate: sandbox.py). Its *result* is a dict: the returned values named
by `spec.outputs` and, for ops that update inputs in place, those inputs as the
caller's tensors hold them after the call. Comparing results is
patterns.core.compare, the one comparison every stage uses.
"""
from __future__ import annotations

import math
from typing import Any, Callable

import torch

from patterns.core.compare import (  # noqa: F401 - the gate's layers import these from here
    Mismatch,
    Result,
    ResultError,
    collect,
    errors,
    first_mismatch,
    identical,
    precise_result,
    precision_mismatch,
    tolerances,
)
from patterns.core.opspec import Inputs, OpSpec, Shape
from patterns.validation.monitor import Observed


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


def call(spec: OpSpec, impl: Any, inputs: Inputs, device: str, *, fill: float = math.nan, observe: Observed | None = None) -> tuple[Result, Inputs]:
    """Run `impl` (a loader.Impl) on clones of `inputs`; return its result and the clones as they are afterwards.

    With `observe`, only the call itself is watched, not the gate's own cloning.
    """
    args = clone_inputs(inputs)
    ret = impl.run(args, fill=fill, observe=observe)
    return collect(spec, ret, args), args


def call_reference(spec: OpSpec, reference: Callable[..., Any], inputs: Inputs) -> Result:
    args = clone_inputs(inputs)
    return collect(spec, reference(**args), args)


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
