"""What the GPU benchmark times for kda_decode: the rewrite chain, FLA 0.6.0 and launch sweeps."""
from __future__ import annotations

from patterns.core.benchspec import Benchmark, Context, Step, Variant, launched, ratio_target, target

STEPS = (
    Step("fused", (("fuse_v_tiles", {}),),
         "one program per head computes the norms, gate and beta once instead of once per V tile"),
    Step("fused+split", (("fuse_v_tiles", {}), ("split_underfilled_grid", {})),
         "B*HV programs under-fill 132 SMs at small batch: V tiles sized from the SM count, warps from the tile"),
    Step("fused+split+hints", (("fuse_v_tiles", {}), ("split_underfilled_grid", {}), ("cache_eviction_hints", {})),
         "q, k and g are read by every V tile of a head: keep them in L2 (evict_last), stream v (evict_first)"),
)
LAUNCHES = [(bv, w) for bv in (8, 16, 32, 64, 128) for w in (1, 2, 4, 8) if not (bv == 128 and w == 1)]


def _fla_default(a: dict) -> dict:
    from fla.ops.kda import fused_recurrent_kda

    o, ht = fused_recurrent_kda(
        a["q"], a["k"], a["v"], a["g"], a["beta"], A_log=a["A_log"], dt_bias=a["dt_bias"], initial_state=a["state"],
        output_final_state=True, use_qk_l2norm_in_kernel=True, use_gate_in_kernel=True, use_beta_sigmoid_in_kernel=True,
    )
    return {"o": o, "state": ht}


def _fla_kernel(a: dict, BV: int, num_warps: int) -> dict:
    """FLA's kernel launched as fused_recurrent_kda_fwd launches it (state updated in place, output not zeroed),
    with BV and num_warps as given: fla-core 0.6.0 fla/ops/kda/fused_recurrent.py, lines 236-335."""
    import torch
    import triton
    from fla.ops.kda.fused_recurrent import fused_recurrent_kda_fwd_kernel

    q, k, v, state = a["q"], a["k"], a["v"], a["state"]
    B, T, H, K = k.shape
    HV, V = v.shape[2], v.shape[3]
    o = torch.empty_like(v)
    launched(fused_recurrent_kda_fwd_kernel[(triton.cdiv(V, BV) * B * HV,)](
        q=q, k=k, v=v, g=a["g"], beta=a["beta"], A_log=a["A_log"], dt_bias=a["dt_bias"], o=o, h0=state, ht=state,
        cu_seqlens=None, ssm_state_indices=None, num_accepted_tokens=None, lower_bound=None, scale=K ** -0.5, N=B, T=T,
        H=H, HV=HV, K=K, V=V, BK=triton.next_power_of_2(K), BV=BV, stride_init_state_token=state.stride(0),
        stride_final_state_token=state.stride(0), stride_indices_seq=1, stride_indices_tok=1, IS_BETA_HEADWISE=False,
        USE_QK_L2NORM_IN_KERNEL=True, INPLACE_FINAL_STATE=True, USE_GATE_IN_KERNEL=True, APPLY_BETA_SIGMOID=True,
        ALLOW_NEG_EIGVAL=False, STATE_V_FIRST=False, num_warps=num_warps, num_stages=2,
    ))
    return {"o": o, "state": state}


def _launch(module, a: dict, BV: int, num_warps: int) -> dict:
    """The baseline's kernel at another (BV, num_warps): the launch its launcher would make with those values."""
    import torch
    import triton

    q, v, state = a["q"], a["v"], a["state"]
    B, T, H, K = q.shape
    HV, V = v.shape[2], v.shape[3]
    o = torch.empty_like(v)
    launched(module.kda_decode_fwd_kernel[(triton.cdiv(V, BV), B * HV)](
        q, a["k"], v, a["g"], a["beta"], a["A_log"], a["dt_bias"], o, state, K ** -0.5, T,
        H=H, HV=HV, K=K, V=V, BK=triton.next_power_of_2(K), BV=BV, num_warps=num_warps,
    ))
    return {"o": o, "state": state}


def _has_fla() -> bool:
    import importlib.util

    return importlib.util.find_spec("fla") is not None


def variants(ctx: Context) -> list[Variant]:
    if ctx.device == "cpu" and not _has_fla():
        vs = []
    else:
        vs = [Variant("FLA default", "upstream", _fla_default,
                      "fused_recurrent_kda(q, k, v, g, beta, A_log, dt_bias, initial_state=state, output_final_state=True, "
                      "use_qk_l2norm_in_kernel=True, use_gate_in_kernel=True, use_beta_sigmoid_in_kernel=True)")]
        vs += [Variant(f"FLA BV={bv} w={w}", "upstream-sweep", lambda a, bv=bv, w=w: _fla_kernel(a, bv, w),
                       f"fused_recurrent_kda_fwd_kernel, BV={bv}, num_warps={w}, state in place") for bv, w in LAUNCHES]
    if ctx.sweep:
        vs += [Variant(f"baseline BV={bv} w={w}", "sweep", lambda a, bv=bv, w=w: _launch(ctx.baseline.module, a, bv, w),
                       f"baseline kernel, BV={bv}, num_warps={w}") for bv, w in LAUNCHES]
    return vs


def targets(res: dict) -> list[dict]:
    out = []
    for row in res["rows"]:
        B, f = row["shape"]["B"], row["final"]
        e = row["variants"][f]
        if B >= 128:
            out.append(target(f"B={B}: >= 90% of copy bandwidth", e["fraction_of_copy"] >= 0.90, f"{e['fraction_of_copy']:.1%}"))
        r = row["ratios"].get(f"{f} vs FLA default")
        if r:
            out.append(ratio_target(f"B={B}: >= 1.15x FLA default", r, 1.15))
        r = row["ratios"].get(f"{f} vs best upstream launch")
        if r:
            out.append(ratio_target(f"B={B}: >= FLA's best launch ({row['best_upstream_launch']})", r, 1.0))
    return out


BENCHMARK = Benchmark(
    title="KDA decode (reference case 3)",
    position=0,
    steps=STEPS,
    variants=variants,
    targets=targets,
    upstream="FLA default",
    shape_keys=("B",),
)
