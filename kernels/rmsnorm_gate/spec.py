"""What the validation gate needs to know about rmsnorm_gate (rows N, width D)."""
from __future__ import annotations

import torch

from patterns.kernels.common import generator, itemsize, torch_dtype
from patterns.core.opspec import OpSpec, Tolerance


def make_inputs(shape: dict, dtype: str, seed: int = 0, device: str = "cpu") -> dict:
    N, D = shape["N"], shape["D"]
    gen = generator(seed, device)
    act = dict(dtype=torch_dtype(dtype), device=device, generator=gen)
    return dict(
        x=torch.randn(N, D, **act),
        g=torch.randn(N, D, **act),
        weight=1. + 0.1 * torch.randn(D, **act),
    )


def bytes_moved(shape: dict, dtype: str) -> float:
    N, D = shape["N"], shape["D"]
    return (3 * N * D + D) * itemsize(dtype)  # read x and g, write y, read the weight


def flops(shape: dict, dtype: str) -> float:
    N, D = shape["N"], shape["D"]
    # square-accumulate 2, normalise and weight 2, silu 4 (exp counted as one), gate 1
    return 9 * N * D


SPEC = OpSpec(
    name="rmsnorm_gate",
    baseline="baseline:rmsnorm_gate",
    reference="naive:naive_rmsnorm_gate",
    make_inputs=make_inputs,
    shapes=(
        dict(N=1, D=128),
        dict(N=7, D=127),
        dict(N=5, D=1000),
        dict(N=3, D=2049),
    ),
    dtypes=("float32", "bfloat16"),
    gpu_dtypes=("bfloat16",),
    tolerance={
        "float32": Tolerance(atol=1e-5, rtol=1e-5),
        "bfloat16": Tolerance(atol=1e-2, rtol=1e-2),
    },
    gpu_shapes=(
        dict(N=128 * 32, D=128),  # decode: batch 128 x 32 heads, per-head norm
        dict(N=8192 * 32, D=128),  # prefill: 8k tokens x 32 heads
        dict(N=8192, D=4096),  # hidden-size norm over 8k tokens
    ),
    outputs=("y",),
    bytes_moved=bytes_moved,
    flops=flops,
    bound="memory",
    sensitive_inputs=("x", "g", "weight"),
    # the mean square sums D terms, in fp32
    accumulation="float32",
    reduction="D",
    resource_limits={
        "max_num_warps": 16,
        "max_shared_memory_bytes": 232448,
    },
)
