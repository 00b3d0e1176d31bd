"""What the validation gate needs to know about matmul (C[M, N] = A[M, K] @ B[K, N])."""
from __future__ import annotations

import math

import torch

from patterns.kernels.common import accepts, generator, itemsize, torch_dtype
from patterns.core.opspec import OpSpec, Partition, Tolerance


def make_inputs(shape: dict, dtype: str, seed: int = 0, device: str = "cpu") -> dict:
    M, N, K = shape["M"], shape["N"], shape["K"]
    gen = generator(seed, device)
    act = dict(dtype=torch_dtype(dtype), device=device, generator=gen)
    # B scaled by K^-1/2 so that C stays O(1) whatever K
    return dict(a=torch.randn(M, K, **act), b=torch.randn(K, N, **act) * K ** -0.5)


def run_partitioned(impl, inputs: dict, n: int) -> torch.Tensor:
    """C computed as a sum over `n` K ranges.

    A launcher that takes `split_k` (a split-K candidate) splits itself; otherwise
    each range is a separate call, its output rounded to the output dtype, and the
    partial products summed here in fp32.
    """
    if accepts(impl, "split_k"):
        return impl(**inputs, split_k=n)
    a, b = inputs["a"], inputs["b"]
    seg = math.ceil(a.shape[1] / n)
    parts = [impl(a=a[:, i:i + seg].contiguous(), b=b[i:i + seg].contiguous()) for i in range(0, a.shape[1], seg)]
    c = sum(p.float() for p in parts)
    return c.to(a.dtype)


def bytes_moved(shape: dict, dtype: str) -> float:
    M, N, K = shape["M"], shape["N"], shape["K"]
    return (M * K + K * N + M * N) * itemsize(dtype)  # compulsory traffic: each operand once


def flops(shape: dict, dtype: str) -> float:
    return 2 * shape["M"] * shape["N"] * shape["K"]


SPEC = OpSpec(
    name="matmul",
    baseline="baseline:matmul",
    reference="naive:naive_matmul",
    make_inputs=make_inputs,
    shapes=(
        dict(M=1, N=33, K=17),
        dict(M=63, N=45, K=97),
        dict(M=200, N=150, K=129),
        dict(M=129, N=257, K=64),
    ),
    # the interpreter's tl.dot on bf16 is not bf16 arithmetic: test fp32 on the CPU, time bf16
    dtypes=("float32",),
    gpu_dtypes=("bfloat16",),
    tolerance={
        "float32": Tolerance(atol=1e-4, rtol=1e-4),
        "bfloat16": Tolerance(atol=2e-2, rtol=2e-2),
    },
    gpu_shapes=(
        dict(M=4096, N=4096, K=4096),
        dict(M=8192, N=8192, K=8192),
    ),
    outputs=("c",),
    partition=Partition(
        axis="K splits",
        counts=(1, 2, 4, 8),
        run=run_partitioned,
        tolerance={
            "float32": Tolerance(atol=1e-4, rtol=1e-4),
            # each partial product rounded to bf16 before the sum
            "bfloat16": Tolerance(atol=3e-2, rtol=3e-2),
        },
        shape=dict(M=64, N=48, K=256),
    ),
    bytes_moved=bytes_moved,
    flops=flops,
    bound="compute",
    sensitive_inputs=("a", "b"),
    # K products summed in fp32 (bf16 operands on the GPU are exact products)
    accumulation="float32",
    reduction="K",
    resource_limits={
        "max_num_warps": 8,
        "max_num_stages": 5,
        "max_shared_memory_bytes": 232448,
    },
)
