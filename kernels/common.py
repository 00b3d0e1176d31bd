"""Small helpers shared by the ops' specs: dtype names, seeded inputs, signatures."""
from __future__ import annotations

import inspect
from typing import Callable

import torch


def torch_dtype(name: str) -> torch.dtype:
    dtype = getattr(torch, name, None)
    if not isinstance(dtype, torch.dtype):
        raise ValueError(f"unknown dtype name {name!r}")
    return dtype


def at_least_fp32(t: torch.Tensor) -> torch.Tensor:
    """`t` in float32, or as it is when wider: a reference given float64 inputs computes in float64
    (the gate's precision check, patterns.core.compare.precise_result)."""
    return t.to(torch.promote_types(t.dtype, torch.float32))


def itemsize(name: str) -> int:
    return torch.empty((), dtype=torch_dtype(name)).element_size()


def generator(seed: int, device: str | torch.device = "cpu") -> torch.Generator:
    """A seeded generator on `device`: inputs are drawn where they are used (the GPU
    shapes reach gigabytes), so a seed is deterministic per device, not across devices."""
    return torch.Generator(device=device).manual_seed(seed)


def accepts(fn: Callable, name: str) -> bool:
    """Whether a launcher takes keyword `name` (e.g. a candidate's `num_kv_splits`)."""
    try:
        return name in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
