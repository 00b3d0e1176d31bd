"""What the GPU benchmark times for matmul: grouped, persistent and autotuned tiles, torch.matmul, tile configs."""
from __future__ import annotations

from patterns.core.benchspec import Benchmark, Context, Step, Variant, launched, ratio_target

STEPS = (
    Step("grouped", (("grouped_pid_ordering", {}),), "GROUP_M-row tile groups reuse B panels in L2"),
    Step("persistent", (("grouped_pid_ordering", {}), ("persistent_tile_loop", {})),
         "one program per SM walks its tiles: no tail wave, no per-tile launch"),
    Step("grouped+autotuned", (("grouped_pid_ordering", {}), ("autotune_configs_keys", {"space": "hopper"})),
         "grouped tiles, then tiles, warps and stages tuned over the Hopper space"),
    Step("autotuned", (("autotune_configs_keys", {"space": "hopper"}),),
         "128x128x32 tiles at 4 warps leave wgmma and the copy pipeline half used: tune tiles, warps, stages"),
)
CONFIGS = [  # (BM, BN, BK, num_warps, num_stages)
    (128, 128, 32, 4, 2), (128, 128, 64, 4, 4), (128, 128, 64, 8, 3), (128, 256, 64, 8, 3),
    (128, 256, 64, 8, 4), (256, 128, 64, 8, 3), (256, 128, 64, 8, 4), (128, 256, 32, 8, 4),
]


def _launch(module, a: dict, cfg: tuple[int, ...], persistent: bool) -> dict:
    import torch
    import triton

    x, y = a["a"], a["b"]
    M, K = x.shape
    N = y.shape[1]
    BM, BN, BK, warps, stages = cfg
    c = torch.empty(M, N, dtype=x.dtype, device=x.device)
    tiles = triton.cdiv(M, BM) * triton.cdiv(N, BN)
    extra = {}
    if persistent:  # the interpreter has no SMs: a few programs still walk several tiles each
        extra["NUM_SMS"] = torch.cuda.get_device_properties(x.device).multi_processor_count if x.is_cuda else 4
    launched(module.matmul_fwd_kernel[(min(extra.get("NUM_SMS", tiles), tiles),)](
        x, y, c, M, N, K, x.stride(0), x.stride(1), y.stride(0), y.stride(1), c.stride(0), c.stride(1),
        BM=BM, BN=BN, BK=BK, GROUP_M=8, **extra, num_warps=warps, num_stages=stages))
    return {"c": c}


def variants(ctx: Context) -> list[Variant]:
    import torch

    vs = [Variant("torch.matmul", "upstream", lambda a: {"c": torch.matmul(a["a"], a["b"])}, f"torch {torch.__version__}")]
    if ctx.sweep:
        for label, persistent in (("grouped", False), ("persistent", True)):
            module = ctx.steps[label].module
            vs += [Variant(f"{label} {'x'.join(map(str, c[:3]))} w={c[3]} s={c[4]}", "sweep",
                           lambda a, module=module, c=c, p=persistent: _launch(module, a, c, p),
                           f"{label} kernel, BM,BN,BK={c[:3]}, num_warps={c[3]}, num_stages={c[4]}") for c in CONFIGS]
    return vs


def targets(res: dict) -> list[dict]:
    out = []
    for row in res["rows"]:
        r = row["ratios"].get(f"{row['final']} vs torch.matmul")
        if r:
            s = row["shape"]
            out.append(ratio_target(f"{s['M']}x{s['N']}x{s['K']}: >= 85% of torch.matmul's rate", r, 0.85))
    return out


BENCHMARK = Benchmark(
    title="GEMM, bf16",
    position=3,
    steps=STEPS,
    variants=variants,
    targets=targets,
    upstream="torch.matmul",
    shape_keys=("M", "N", "K"),
)
