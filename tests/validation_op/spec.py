"""OpSpec of the test op rowdot (out = x @ w + b), declared like a kernels/<op>/spec.py."""
from pathlib import Path

import torch

from patterns.core.opspec import Acceptance, OpSpec, Partition, Tolerance

HERE = Path(__file__).parent


def make_inputs(shape, dtype, seed, device):
    g = torch.Generator().manual_seed(seed)
    dt = getattr(torch, dtype)
    M, K = shape["M"], shape["K"]
    return {
        "x": torch.randn(M, K, generator=g).to(device, dt),
        # a norm-style weight: all ones, so only perturbation shows whether it is read
        "w": torch.ones(K).to(device, dt),
        "b": torch.randn(M, generator=g).to(device, dt),
    }


SPEC = OpSpec(
    name="rowdot",
    baseline=f"{HERE / 'baseline.py'}:rowdot",
    reference=f"{HERE / 'reference.py'}:rowdot_ref",
    make_inputs=make_inputs,
    shapes=({"M": 3, "K": 67}, {"M": 2, "K": 130}),
    dtypes=("float32", "float16"),
    tolerance={"float32": Tolerance(1e-4, 1e-4), "float16": Tolerance(2e-2, 1e-2)},
    gpu_shapes=({"M": 4097, "K": 4096},),
    partition=Partition(
        axis="K splits",
        counts=(1, 8, 64),
        run=lambda impl, inputs, n: impl(**inputs, num_splits=n),
        tolerance={"float32": Tolerance(1e-4, 1e-4)},
        shape={"M": 1, "K": 515},
    ),
    bytes_moved=lambda s, d: (s["M"] * s["K"] + s["K"] + 2 * s["M"]) * torch.empty((), dtype=getattr(torch, d)).element_size(),
    flops=lambda s, d: 2 * s["M"] * s["K"],
    bound="memory",
    acceptance=Acceptance(min_speedup=1.0, max_slowdown_any_shape=0.05),
    resource_limits={"max_BLOCK_K": 256, "max_num_warps": 8},
    accumulation="float32",
    reduction="K",
)
