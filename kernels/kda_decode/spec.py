"""What the validation gate needs to know about kda_decode."""
from __future__ import annotations

import torch

from patterns.kernels.common import generator, itemsize, torch_dtype
from patterns.core.opspec import OpSpec, Tolerance


def make_inputs(shape: dict, dtype: str, seed: int = 0, device: str = "cpu") -> dict:
    B, T, H, HV, K, V = (shape[n] for n in ("B", "T", "H", "HV", "K", "V"))
    gen = generator(seed, device)
    act = dict(dtype=torch_dtype(dtype), device=device, generator=gen)
    # parameters and state are fp32 whatever the activation dtype, as in a served model
    f32 = dict(dtype=torch.float32, device=device, generator=gen)
    return dict(
        q=torch.randn(B, T, H, K, **act),
        k=torch.randn(B, T, H, K, **act),
        v=torch.randn(B, T, HV, V, **act),
        g=torch.randn(B, T, HV, K, **act),
        beta=torch.randn(B, T, HV, **act),
        A_log=(1.5 * torch.rand(HV, **f32)).log(),
        dt_bias=0.5 * torch.randn(HV * K, **f32),
        state=0.5 * torch.randn(B, HV, K, V, **f32),
    )


def bytes_moved(shape: dict, dtype: str) -> float:
    B, T, H, HV, K, V = (shape[n] for n in ("B", "T", "H", "HV", "K", "V"))
    s = itemsize(dtype)
    state = 2 * B * HV * K * V * 4  # read and written once, fp32
    acts = B * T * (2 * H * K + HV * K + 2 * HV * V + HV) * s  # q, k, g, v, o, beta
    params = HV * 4 + HV * K * 4  # A_log, dt_bias
    return state + acts + params


def flops(shape: dict, dtype: str) -> float:
    B, T, H, HV, K, V = (shape[n] for n in ("B", "T", "H", "HV", "K", "V"))
    # per token and value head: decay K*V, k^T h 2*K*V, rank-1 update 2*K*V, q^T h 2*K*V
    return B * T * HV * 7 * K * V


def _s(B, T, H, HV, K, V):
    return dict(B=B, T=T, H=H, HV=HV, K=K, V=V)


SPEC = OpSpec(
    name="kda_decode",
    baseline="baseline:kda_decode",
    reference="naive:naive_kda_decode",
    make_inputs=make_inputs,
    shapes=(
        _s(1, 1, 2, 2, 64, 64),
        _s(3, 1, 1, 3, 33, 63),
        _s(1, 4, 2, 4, 16, 45),
        _s(1, 7, 3, 3, 48, 32),
    ),
    dtypes=("float32", "bfloat16"),
    gpu_dtypes=("bfloat16",),
    tolerance={
        "float32": Tolerance(atol=1e-4, rtol=1e-4),
        # o is rounded to bf16 (2^-8 relative); the fp32 state sees identical inputs
        "bfloat16": Tolerance(atol=1e-3, rtol=1e-2),
    },
    gpu_shapes=tuple(_s(B, 1, 32, 32, 128, 128) for B in (1, 8, 32, 128, 512)),
    inplace=("state",),
    outputs=("o",),
    bytes_moved=bytes_moved,
    flops=flops,
    bound="memory",
    sensitive_inputs=("q", "k", "v", "g", "beta", "A_log", "dt_bias", "state"),
    # fp32 throughout: per token K-long sums (norms, k^T h, q^T h) into a state carried over T tokens
    accumulation="float32",
    reduction=lambda s: s["K"] * (s["T"] + 1),
    resource_limits={
        "max_num_warps": 8,
        "max_shared_memory_bytes": 232448,
        # a program holds a [K, BV] fp32 state tile: at most a whole head
        "max_BV": 128,
    },
)
