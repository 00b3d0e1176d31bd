"""What the validation gate needs to know about cp_state_merge.

Inputs are the chunk summaries of a real recurrence: N*L tokens of a gated
delta rule, token t with transition A_t = (I - beta_t k_t k_t^T) diag(exp(g_t))
and input b_t = beta_t k_t v_t^T, grouped into N chunks of L tokens and
composed in fp64. The decay is sized so that the whole sequence forgets about
e^-0.5 per key dimension: state from the first chunk still matters at the last,
which is when context parallelism needs the merge at all.
"""
from __future__ import annotations

import torch

from patterns.kernels.common import generator, itemsize
from patterns.core.opspec import OpSpec, Partition, Tolerance


def _tokens(T: int, H: int, K: int, V: int, gen: torch.Generator):
    f64 = dict(dtype=torch.float64, device=gen.device, generator=gen)
    k = torch.randn(T, H, K, **f64)
    k = k / k.norm(dim=-1, keepdim=True)
    beta = torch.rand(T, H, 1, 1, **f64)
    alpha = (-torch.rand(T, H, K, **f64) / T).exp()
    v = torch.randn(T, H, V, **f64)
    return k, beta, alpha, v


def _apply_token(x, k, beta, alpha, v=None):
    """A_t @ x (+ b_t) for x [H, K, *] as a rank-1 update: O(K * cols) instead of O(K^2 * cols)."""
    x = x * alpha[..., None]
    x = x - beta * k[..., None] * (k[..., None] * x).sum(-2, keepdim=True)
    if v is not None:
        x = x + beta * k[..., None] * v[:, None, :]
    return x


def make_inputs(shape: dict, dtype: str, seed: int = 0, device: str = "cpu") -> dict:
    N, H, K, V = (shape[n] for n in ("N", "H", "K", "V"))
    L = shape.get("L", 16)
    gen = generator(seed, device)
    k, beta, alpha, v = _tokens(N * L, H, K, V, gen)
    h0 = torch.randn(H, K, V, dtype=torch.float64, device=device, generator=gen)
    eye = torch.eye(K, dtype=torch.float64, device=device).expand(H, K, K)
    m = torch.zeros(N, H, K, K, dtype=torch.float32, device=device)
    h_local = torch.zeros(N, H, K, V, dtype=torch.float32, device=device)
    for i in range(N):
        b_m, b_h = eye, torch.zeros(H, K, V, dtype=torch.float64, device=device)
        for t in range(i * L, (i + 1) * L):
            b_m = _apply_token(b_m, k[t], beta[t], alpha[t])
            b_h = _apply_token(b_h, k[t], beta[t], alpha[t], v[t])
        m[i], h_local[i] = b_m, b_h
    # states and transitions are fp32 whatever `dtype` says; it only names the tolerance
    return dict(m=m, h_local=h_local, h0=h0.float())


def _compose(m: torch.Tensor, h_local: torch.Tensor):
    """One summary for consecutive chunks, in fp64: M = M_j ... M_i, h = fold of the h_local."""
    b_m, b_h = m[0].double(), h_local[0].double()
    for i in range(1, m.shape[0]):
        b_m = m[i].double() @ b_m
        b_h = m[i].double() @ b_h + h_local[i].double()
    return b_m, b_h


def run_partitioned(impl, inputs: dict, n: int) -> torch.Tensor:
    """Group the N input chunks into n partitions, summarise each exactly, merge them with `impl`."""
    m, h_local, h0 = inputs["m"], inputs["h_local"], inputs["h0"]
    N = m.shape[0]
    assert N % n == 0, f"{n} partitions do not divide {N} chunks"
    L = N // n
    parts = [_compose(m[i * L:(i + 1) * L], h_local[i * L:(i + 1) * L]) for i in range(n)]
    p_m = torch.stack([p[0] for p in parts]).float().contiguous()
    p_h = torch.stack([p[1] for p in parts]).float().contiguous()
    return impl(m=p_m, h_local=p_h, h0=h0)[-1]


def unpartitioned(inputs: dict) -> torch.Tensor:
    """The sequential recurrence over every chunk in fp64: the final state without merge rounding."""
    h = inputs["h0"].double()
    for b_m, b_h in zip(inputs["m"], inputs["h_local"]):
        h = b_m.double() @ h + b_h.double()
    return h.float()


def bytes_moved(shape: dict, dtype: str) -> float:
    N, H, K, V = (shape[n] for n in ("N", "H", "K", "V"))
    s = itemsize("float32")
    # read M_i and h_local_i, write h_i, read h0 once
    return (N * H * (K * K + 2 * K * V) + H * K * V) * s


def flops(shape: dict, dtype: str) -> float:
    N, H, K, V = (shape[n] for n in ("N", "H", "K", "V"))
    return N * H * (2 * K * K * V + K * V)


def _s(N, H, K, V, L=16):
    return dict(N=N, H=H, K=K, V=V, L=L)


SPEC = OpSpec(
    name="cp_state_merge",
    baseline="baseline:cp_state_merge",
    reference="naive:naive_cp_state_merge",
    make_inputs=make_inputs,
    shapes=(
        _s(1, 1, 16, 32),
        _s(7, 2, 33, 45),
        _s(9, 1, 64, 63, L=8),
        _s(3, 3, 64, 64, L=4),
    ),
    dtypes=("float32",),
    tolerance={
        # admits TF32 on the GPU over these short chains (<= 9 merges, about 5e-3
        # worst case); the partition check is where the precision is judged
        "float32": Tolerance(atol=1e-2, rtol=1e-2),
    },
    gpu_shapes=(
        _s(64, 1, 64, 64),
        _s(8, 32, 128, 128),
        _s(64, 32, 128, 128),
        _s(512, 32, 128, 128, L=1),
    ),
    outputs=("h",),
    partition=Partition(
        axis="merged chunks",
        counts=(1, 8, 64, 512),
        run=run_partitioned,
        # fp32 accuracy over 512 merges: fp32 and tf32x3 stay below ~1e-5, TF32 does not
        tolerance={"float32": Tolerance(atol=1e-3, rtol=1e-3)},
        shape=_s(512, 1, 64, 64, L=1),
        unpartitioned=unpartitioned,
    ),
    bytes_moved=bytes_moved,
    flops=flops,
    bound="memory",
    sensitive_inputs=("m", "h_local", "h0"),
    # N chained K-long products; the baseline's fp32 tl.dot is TF32 on the GPU (the
    # tolerance above admits it; the partition check judges the precision)
    accumulation="tf32",
    reduction=lambda s: s["N"] * s["K"],
    resource_limits={
        "max_num_warps": 8,
        "max_shared_memory_bytes": 232448,
    },
)
