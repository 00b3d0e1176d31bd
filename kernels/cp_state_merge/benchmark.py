"""What the GPU benchmark times for cp_state_merge: tf32x3, and launch sweeps at TF32 and tf32x3."""
from __future__ import annotations

from patterns.core.benchspec import Benchmark, Context, Step, Variant, fmt_ratio, launched, target

STEPS = (
    Step("tf32x3", (("tf32x3_dot_precision", {}),),
         "three TF32 MMAs per fp32 dot: the merge error stops growing with the number of merges"),
)
# BV=128 (one program per head, M read once) fits shared memory only unpipelined
LAUNCHES = [(bv, w, 2) for bv in (16, 32, 64) for w in (4, 8)] + [(128, 4, 1), (128, 8, 1)]


def _launch(module, a: dict, BV: int, num_warps: int, num_stages: int) -> dict:
    import torch
    import triton

    m, h_local, h0 = a["m"], a["h_local"], a["h0"]
    N, H, K, V = h_local.shape
    h = torch.empty(N, H, K, V, dtype=torch.float32, device=h_local.device)
    launched(module.cp_state_merge_fwd_kernel[(triton.cdiv(V, BV), H)](
        m, h_local, h0, h, N, H=H, K=K, V=V, BK=max(16, triton.next_power_of_2(K)), BV=BV, num_warps=num_warps, num_stages=num_stages))
    return {"h": h}


def variants(ctx: Context) -> list[Variant]:
    if not ctx.sweep:
        return []
    kernels = {"tf32": ctx.baseline.module, "tf32x3": ctx.steps["tf32x3"].module}
    launches = {"tf32": LAUNCHES, "tf32x3": LAUNCHES + [(bv, w, 1) for bv in (32, 64) for w in (4, 8)]}
    return [Variant(f"{prec} BV={bv} w={w} s={s}", "sweep", lambda a, mod=kernels[prec], bv=bv, w=w, s=s: _launch(mod, a, bv, w, s),
                    f"{'baseline' if prec == 'tf32' else 'tf32x3'} kernel, BV={bv}, num_warps={w}, num_stages={s}")
            for prec in kernels for bv, w, s in launches[prec]]


def targets(res: dict) -> list[dict]:
    out = []
    part = res.get("partition")
    if part:
        base = {p["n"]: p for p in part["baseline"]}
        cand = {p["n"]: p for p in part["candidate"]}
        fails = all(not base[n].get("passed", False) for n in base if n >= 64)
        out.append(target("default precision fails the partition check from 64 merges", fails,
                          ", ".join(f"n={n}: {base[n].get('rel_err', float('nan')):.1e}" for n in sorted(base))))
        out.append(target("tf32x3 passes it at every count", bool(part["passed"]),
                          ", ".join(f"n={n}: {cand[n].get('rel_err', float('nan')):.1e}" for n in sorted(cand))))
    for row in res["rows"]:
        if row["shape"]["N"] in (64, 512) and row["shape"]["K"] == 128:
            r = row["ratios"][f"{row['final']} vs baseline"]
            cost = 1 / r["median"]
            out.append(target(f"N={row['shape']['N']}: tf32x3 costs <= 1.5x the TF32 time", cost <= 1.5,
                              f"{cost:.2f}x (ratio {fmt_ratio(r)})"))
    return out


BENCHMARK = Benchmark(
    title="Context-parallel state merge, tf32x3 (reference case 1)",
    position=1,
    steps=STEPS,
    variants=variants,
    targets=targets,
    shape_keys=("N", "H", "K"),
)
