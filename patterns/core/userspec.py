"""What a spec written by `patterns spec init` is made of: inputs from the launcher's signature.

A generated spec.py (see the README, "Your own kernel") declares each argument
of the launcher once, in `ARGS`:

    ARGS = {
        "x": Tensor("N", "D"),                   # a tensor of the activation dtype ("H*K": a product)
        "weight": Tensor("D", dtype="float32"),  # a tensor of a fixed dtype
        "eps": 1e-6,                             # any other value: passed as is
    }
    make_inputs = inputs_from(ARGS)

and `inputs_from` turns it into the gate's `make_inputs(shape, dtype, seed,
device)`: every tensor drawn from a seeded generator at the sizes the shape
gives its dimension names. Integer tensors are drawn in [0, high), floating
ones from a normal distribution (scaled by `scale`); `positive=True` draws
|x| + 0.5 for inputs that must not be zero or negative (a variance, a rate).

`split_partition` is the partition check of a launcher with a split
parameter (num_splits, num_kv_splits, split_k, ...): the op computed with the
parameter set to each count, compared with the reference on the whole input.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

from patterns.core.opspec import Inputs, Partition, Shape, Tolerance

# per activation dtype: fp32 accumulates in fp32; a 16-bit output is rounded to
# 2^-8 (bf16) or 2^-11 (fp16) of its magnitude, so the tolerance sits above one ulp
TOLERANCES = {
    "float32": Tolerance(atol=1e-5, rtol=1e-5),
    "float16": Tolerance(atol=2e-3, rtol=2e-3),
    "bfloat16": Tolerance(atol=1e-2, rtol=1e-2),
}


@dataclass(frozen=True)
class Tensor:
    """A tensor argument: its dimensions (names of the shape's sizes, or ints) and how it is drawn."""

    dims: tuple[str | int, ...]
    dtype: str = ""  # "": the activation dtype of the check
    high: int = 16  # integer tensors: values in [0, high)
    scale: float = 1.0
    positive: bool = False
    # the order the dimensions lie in memory, outermost first (a permutation of dims; () for dims'
    # own): HF-style attention hands q as [B, T, H, D] memory viewed as [B, H, T, D], and a launcher
    # that transposes back relies on that layout (at T=1 a contiguous [B, H, 1, D] has other strides)
    storage: tuple[str | int, ...] = ()

    def __init__(self, *dims: str | int, dtype: str = "", high: int = 16, scale: float = 1.0, positive: bool = False,
                 storage: tuple[str | int, ...] = ()):
        object.__setattr__(self, "dims", tuple(dims))
        object.__setattr__(self, "dtype", dtype)
        object.__setattr__(self, "high", high)
        object.__setattr__(self, "scale", scale)
        object.__setattr__(self, "positive", positive)
        if storage and sorted(map(str, storage)) != sorted(map(str, dims)):
            raise ValueError(f"storage {tuple(storage)} is not an order of the dimensions {tuple(dims)}")
        object.__setattr__(self, "storage", tuple(storage))

    def size(self, shape: Shape) -> tuple[int, ...]:
        """The sizes at `shape`: a dimension is an int, a name, or a product of them ("HV*K")."""
        return tuple(d if isinstance(d, int) else math.prod(int(f) if f.isdigit() else shape[f] for f in d.split("*")) for d in self.dims)


def inputs_from(args: dict[str, Any]) -> Callable[[Shape, str, int, str], Inputs]:
    """The gate's make_inputs for a launcher whose arguments `args` declares (Tensor or a plain value)."""

    def make_inputs(shape: Shape, dtype: str, seed: int = 0, device: str = "cpu") -> Inputs:
        import torch

        gen = torch.Generator(device=device).manual_seed(seed)
        out: Inputs = {}
        for name, arg in args.items():
            if not isinstance(arg, Tensor):
                out[name] = arg
                continue
            kind = getattr(torch, arg.dtype or dtype)
            # drawn in memory order, then viewed in the launcher's order
            order = [list(map(str, arg.dims)).index(str(d)) for d in arg.storage] if arg.storage else list(range(len(arg.dims)))
            logical = arg.size(shape)
            size = tuple(logical[i] for i in order)
            if kind.is_floating_point:
                t = torch.randn(size, dtype=torch.float32, device=device, generator=gen) * arg.scale
                out[name] = (t.abs() + 0.5 if arg.positive else t).to(kind)
            elif kind == torch.bool:
                out[name] = torch.randint(0, 2, size, device=device, generator=gen).bool()
            else:
                out[name] = torch.randint(0, arg.high, size, dtype=kind, device=device, generator=gen)
            if arg.storage:
                out[name] = out[name].permute(*(order.index(i) for i in range(len(order))))
        return out

    return make_inputs


def split_partition(axis: str, counts: tuple[int, ...], tolerance: dict[str, Tolerance]) -> Partition:
    """The partition check of a split parameter: the launcher with `axis` = n for each count
    (a tensor argument of that name is filled with n), against the reference on the whole input."""

    def run(fn: Callable, inputs: Inputs, n: int) -> Any:
        import torch

        value = inputs.get(axis)
        return fn(**{**inputs, axis: torch.full_like(value, n) if isinstance(value, torch.Tensor) else n})

    return Partition(axis=axis, counts=tuple(counts), run=run, tolerance=dict(tolerance))
