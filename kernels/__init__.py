"""patterns.kernels: the project's own Triton kernels, each beside its plain PyTorch reference.

One folder per op: `naive.py` (reference), `baseline.py` (the Triton kernel and
its launcher), `spec.py` (`SPEC`, what the validation gate reads) and
`README.md` (the maths, the traffic and FLOP model, what is left to improve).
Op modules are imported on demand: importing this package loads no kernel.
"""
from __future__ import annotations

import importlib
from typing import Any, Callable

OPS = ("kda_decode", "cp_state_merge", "decode_attention", "rmsnorm_gate", "matmul")


def load_spec(op: str):
    """The op's `SPEC` (patterns.core.opspec.OpSpec)."""
    if op not in OPS:
        raise KeyError(f"unknown op {op!r}; ops: {', '.join(OPS)}")
    return importlib.import_module(f"{__name__}.{op}.spec").SPEC


def resolve(op: str, target: str) -> Callable[..., Any]:
    """A `"module:function"` of an op's spec (its baseline or reference) as the function."""
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(f"{__name__}.{op}.{module}"), name)
