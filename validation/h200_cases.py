"""Issue #8's four cases on one GPU: each op's baseline, the rewrites' candidates and upstream, side by side.

    python -m patterns.validation.h200_cases --out DIR [--cases kda_decode,cp_state_merge,decode_attention,matmul]
        [--rounds 15] [--sweep [CASES]] [--candidate OP=PATH ...] [--warm-workers 12]

Every candidate is what the rewrites produce: each step of STEPS is a chain of
`patterns apply` calls on kernels/<op>/baseline.py, run here, and its source is
kept in the JSON. `--candidate OP=PATH` replaces an op's last step with a file
(an accepted review item). Upstream is FLA 0.6.0's `fused_recurrent_kda`
(its default call and its kernel at every (BV, num_warps) launch) for KDA and
torch.matmul for GEMM; the limit is the device-to-device copy bandwidth or the
bf16 matmul rate measured in the same process.

Each case runs in a process of its own: inputs from the op's spec at its GPU
shapes, every implementation checked against the op's reference on those inputs,
then all of them timed interleaved (validation/perf.py: CUDA graphs, L2 flushed
before every launch, rotating order), ratios per round with bootstrap intervals.
`--sweep` adds launch-parameter variants of the kernels (the evidence behind the
rewrites' launch heuristics), for every case or the ones named. `--warm-workers N` compiles every variant in N
parallel processes first, so the timed processes find Triton's cache warm.
Writes DIR/<op>.json; `python -m patterns.validation.benchmarks_report` renders them.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from patterns.core.files import write_atomic

CASES = ("kda_decode", "cp_state_merge", "decode_attention", "matmul")
Chain = tuple[tuple[str, dict[str, str]], ...]


@dataclass(frozen=True)
class Step:
    """One candidate: a chain of rewrites applied in order to the op's baseline."""

    label: str
    chain: Chain
    hypothesis: str


# the rewrites as data: each op's steps, each a full chain from baseline.py; the last is the op's candidate
STEPS: dict[str, tuple[Step, ...]] = {
    "kda_decode": (
        Step("fused", (("fuse_v_tiles", {}),),
             "one program per head computes the norms, gate and beta once instead of once per V tile"),
        Step("fused+split", (("fuse_v_tiles", {}), ("split_underfilled_grid", {})),
             "B*HV programs under-fill 132 SMs at small batch: V tiles sized from the SM count, warps from the tile"),
        Step("fused+split+hints", (("fuse_v_tiles", {}), ("split_underfilled_grid", {}), ("cache_eviction_hints", {})),
             "q, k and g are read by every V tile of a head: keep them in L2 (evict_last), stream v (evict_first)"),
    ),
    "cp_state_merge": (
        Step("tf32x3", (("tf32x3_dot_precision", {}),),
             "three TF32 MMAs per fp32 dot: the merge error stops growing with the number of merges"),
    ),
    "decode_attention": (
        Step("split-KV", (("split_kv_lse_merge", {}),),
             "B*HQ programs under-fill the SMs at small batch: split the KV range and merge by log-sum-exp"),
        Step("split-KV+grouped", (("split_kv_lse_merge", {}), ("gqa_head_grouping", {})),
             "the HQ/HK query heads of a group each reload the shared K/V: one program per KV head loads it once"),
    ),
    "matmul": (
        Step("grouped", (("grouped_pid_ordering", {}),), "GROUP_M-row tile groups reuse B panels in L2"),
        Step("persistent", (("grouped_pid_ordering", {}), ("persistent_tile_loop", {})),
             "one program per SM walks its tiles: no tail wave, no per-tile launch"),
        Step("grouped+autotuned", (("grouped_pid_ordering", {}), ("autotune_configs_keys", {"space": "hopper"})),
             "grouped tiles, then tiles, warps and stages tuned over the Hopper space"),
        Step("autotuned", (("autotune_configs_keys", {"space": "hopper"}),),
             "128x128x32 tiles at 4 warps leave wgmma and the copy pipeline half used: tune tiles, warps, stages"),
    ),
}
# launch-parameter sweeps of the same chains (only with --sweep): op -> [(label, chain)]
SWEEP_CHAINS: dict[str, list[tuple[str, Chain]]] = {
    "decode_attention": [(f"split-KV x{n}", (("split_kv_lse_merge", {"num_splits": str(n)}),)) for n in (2, 4, 8, 16, 32)],
}
# the last kernel a sweep launcher compiled: its resources go into the JSON (registers, spills, MMA kind)
_LAST_LAUNCH: list[Any] = []


def _launched(handle) -> None:
    _LAST_LAUNCH[:] = [handle]


def _resources(handle) -> dict[str, Any]:
    """Registers, spills, shared memory and which MMA instructions the compiled kernel uses (from its PTX)."""
    out: dict[str, Any] = {}
    for key, get in (("registers", lambda h: h.n_regs), ("spills", lambda h: h.n_spills), ("shared_bytes", lambda h: h.metadata.shared)):
        try:
            out[key] = int(get(handle))
        except Exception:  # noqa: BLE001 - fields differ between Triton versions; record what there is
            pass
    try:
        ptx = handle.asm["ptx"]
        out["ptx_wgmma"] = ptx.count("wgmma.mma_async")
        out["ptx_mma_sync"] = ptx.count("mma.sync")
    except Exception:  # noqa: BLE001
        pass
    return out


def _autotuned(module) -> dict[str, str]:
    """kernel -> the config its @triton.autotune chose for the last key it tuned."""
    out: dict[str, str] = {}
    for name, obj in (vars(module) if module is not None else {}).items():
        best = getattr(obj, "best_config", None)
        if best is not None and hasattr(obj, "configs"):
            out[name] = str(best)
    return out


FLA = ("fla-core", "0.6.0", "fla/ops/kda/fused_recurrent.py", "fused_recurrent_kda_fwd", "236-335")


@dataclass
class Variant:
    """One implementation timed in a case: `launch(inputs)` runs the op once and names its outputs."""

    name: str
    role: str  # baseline | step | upstream | upstream-sweep | sweep
    launch: Callable[[dict], Any]  # what is timed: no copies
    note: str = ""
    # names (and copies) what `launch` returned, for the comparison with the reference
    outputs: Callable[[Any, dict], dict] = lambda ret, a: ret
    module: Any = None  # the candidate's module, where an autotuner records the config it chose


@dataclass
class Ctx:
    op: str
    spec: Any
    device: str
    sweep: bool
    steps: dict[str, Any] = field(default_factory=dict)  # label -> Impl
    sweeps: dict[str, Any] = field(default_factory=dict)  # label -> Impl (SWEEP_CHAINS)
    baseline: Any = None
    sources: dict[str, dict] = field(default_factory=dict)  # label -> {chain, source}


# --------------------------------------------------------------------------------------
# candidates: the rewrites applied to the baseline
# --------------------------------------------------------------------------------------


def apply_chain(op: str, chain: Chain, dest: Path) -> str:
    """Apply `chain` to kernels/<op>/baseline.py as `patterns apply` would; write and return the result."""
    from patterns.rewriter.base import apply
    from patterns.core.ops import load_spec, source_path

    spec = load_spec(op)
    source = source_path(spec, spec.baseline).read_text()
    for pattern, params in chain:
        source = apply(pattern, source, str(dest), params=params).candidate.source
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(source)
    return source


def load_candidates(ctx: Ctx, work: Path, overrides: dict[str, Path]) -> None:
    from patterns.core.ops import source_path
    from patterns.validation.loader import load_impl

    ctx.baseline = load_impl(ctx.spec, "baseline", source_path(ctx.spec, ctx.spec.baseline))
    steps = list(STEPS[ctx.op])
    for i, step in enumerate(steps):
        path = work / f"{ctx.op}--{step.label}.py"
        if i == len(steps) - 1 and ctx.op in overrides:
            path = overrides[ctx.op]
            ctx.sources[step.label] = {"chain": "accepted candidate", "path": str(path), "source": path.read_text()}
        else:
            ctx.sources[step.label] = {"chain": _chain_text(step.chain), "hypothesis": step.hypothesis,
                                       "source": apply_chain(ctx.op, step.chain, path)}
        ctx.steps[step.label] = load_impl(ctx.spec, "candidate", path)
    if ctx.sweep:
        for label, chain in SWEEP_CHAINS.get(ctx.op, []):
            path = work / f"{ctx.op}--{label.replace(' ', '_')}.py"
            apply_chain(ctx.op, chain, path)
            ctx.sweeps[label] = load_impl(ctx.spec, "candidate", path)


def _chain_text(chain: Chain) -> str:
    return " | ".join(" ".join([f"patterns apply {p}", *(f"--param {k}={v}" for k, v in params.items())]) for p, params in chain)


def _impl_variant(ctx: Ctx, name: str, role: str, impl, note: str = "") -> Variant:
    from patterns.validation.runner import collect

    return Variant(name, role, lambda a, impl=impl: impl.launcher(**a), note, outputs=lambda ret, a: collect(ctx.spec, ret, a),
                   module=impl.module)


# --------------------------------------------------------------------------------------
# kda_decode: FLA 0.6.0 and launch sweeps of the kernels
# --------------------------------------------------------------------------------------


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
    import triton
    from fla.ops.kda.fused_recurrent import fused_recurrent_kda_fwd_kernel

    q, k, v, state = a["q"], a["k"], a["v"], a["state"]
    B, T, H, K = k.shape
    HV, V = v.shape[2], v.shape[3]
    o = torch_empty_like(v)
    _launched(fused_recurrent_kda_fwd_kernel[(triton.cdiv(V, BV) * B * HV,)](
        q=q, k=k, v=v, g=a["g"], beta=a["beta"], A_log=a["A_log"], dt_bias=a["dt_bias"], o=o, h0=state, ht=state,
        cu_seqlens=None, ssm_state_indices=None, num_accepted_tokens=None, lower_bound=None, scale=K ** -0.5, N=B, T=T,
        H=H, HV=HV, K=K, V=V, BK=triton.next_power_of_2(K), BV=BV, stride_init_state_token=state.stride(0),
        stride_final_state_token=state.stride(0), stride_indices_seq=1, stride_indices_tok=1, IS_BETA_HEADWISE=False,
        USE_QK_L2NORM_IN_KERNEL=True, INPLACE_FINAL_STATE=True, USE_GATE_IN_KERNEL=True, APPLY_BETA_SIGMOID=True,
        ALLOW_NEG_EIGVAL=False, STATE_V_FIRST=False, num_warps=num_warps, num_stages=2,
    ))
    return {"o": o, "state": state}


def torch_empty_like(t):
    import torch

    return torch.empty_like(t)


def _kda_launch(module, a: dict, BV: int, num_warps: int) -> dict:
    """The baseline's kernel at another (BV, num_warps): the launch its launcher would make with those values."""
    import triton

    q, v, state = a["q"], a["v"], a["state"]
    B, T, H, K = q.shape
    HV, V = v.shape[2], v.shape[3]
    o = torch_empty_like(v)
    _launched(module.kda_decode_fwd_kernel[(triton.cdiv(V, BV), B * HV)](
        q, a["k"], v, a["g"], a["beta"], a["A_log"], a["dt_bias"], o, state, K ** -0.5, T,
        H=H, HV=HV, K=K, V=V, BK=triton.next_power_of_2(K), BV=BV, num_warps=num_warps,
    ))
    return {"o": o, "state": state}


def _has_fla() -> bool:
    import importlib.util

    return importlib.util.find_spec("fla") is not None


KDA_LAUNCHES = [(bv, w) for bv in (8, 16, 32, 64, 128) for w in (1, 2, 4, 8) if not (bv == 128 and w == 1)]


def kda_variants(ctx: Ctx) -> list[Variant]:
    if ctx.device == "cpu" and not _has_fla():
        vs = []
    else:
        vs = [Variant("FLA default", "upstream", _fla_default,
                      "fused_recurrent_kda(q, k, v, g, beta, A_log, dt_bias, initial_state=state, output_final_state=True, "
                      "use_qk_l2norm_in_kernel=True, use_gate_in_kernel=True, use_beta_sigmoid_in_kernel=True)")]
        vs += [Variant(f"FLA BV={bv} w={w}", "upstream-sweep", lambda a, bv=bv, w=w: _fla_kernel(a, bv, w),
                       f"fused_recurrent_kda_fwd_kernel, BV={bv}, num_warps={w}, state in place") for bv, w in KDA_LAUNCHES]
    if ctx.sweep:
        vs += [Variant(f"baseline BV={bv} w={w}", "sweep", lambda a, bv=bv, w=w: _kda_launch(ctx.baseline.module, a, bv, w),
                       f"baseline kernel, BV={bv}, num_warps={w}") for bv, w in KDA_LAUNCHES]
    return vs


# --------------------------------------------------------------------------------------
# cp_state_merge: launch sweeps at TF32 and tf32x3
# --------------------------------------------------------------------------------------


def _cp_launch(module, a: dict, BV: int, num_warps: int, num_stages: int) -> dict:
    import torch
    import triton

    m, h_local, h0 = a["m"], a["h_local"], a["h0"]
    N, H, K, V = h_local.shape
    h = torch.empty(N, H, K, V, dtype=torch.float32, device=h_local.device)
    _launched(module.cp_state_merge_fwd_kernel[(triton.cdiv(V, BV), H)](
        m, h_local, h0, h, N, H=H, K=K, V=V, BK=max(16, triton.next_power_of_2(K)), BV=BV, num_warps=num_warps, num_stages=num_stages))
    return {"h": h}


# BV=128 (one program per head, M read once) fits shared memory only unpipelined
CP_LAUNCHES = [(bv, w, 2) for bv in (16, 32, 64) for w in (4, 8)] + [(128, 4, 1), (128, 8, 1)]


def cp_variants(ctx: Ctx) -> list[Variant]:
    if not ctx.sweep:
        return []
    kernels = {"tf32": ctx.baseline.module, "tf32x3": ctx.steps["tf32x3"].module}
    launches = {"tf32": CP_LAUNCHES, "tf32x3": CP_LAUNCHES + [(bv, w, 1) for bv in (32, 64) for w in (4, 8)]}
    return [Variant(f"{prec} BV={bv} w={w} s={s}", "sweep", lambda a, mod=kernels[prec], bv=bv, w=w, s=s: _cp_launch(mod, a, bv, w, s),
                    f"{'baseline' if prec == 'tf32' else 'tf32x3'} kernel, BV={bv}, num_warps={w}, num_stages={s}")
            for prec in kernels for bv, w, s in launches[prec]]


# --------------------------------------------------------------------------------------
# decode_attention: split counts
# --------------------------------------------------------------------------------------


def decode_variants(ctx: Ctx) -> list[Variant]:
    return [_impl_variant(ctx, label, "sweep", impl, label) for label, impl in ctx.sweeps.items()]


# --------------------------------------------------------------------------------------
# matmul: torch.matmul and tile configs
# --------------------------------------------------------------------------------------

MM_CONFIGS = [  # (BM, BN, BK, num_warps, num_stages)
    (128, 128, 32, 4, 2), (128, 128, 64, 4, 4), (128, 128, 64, 8, 3), (128, 256, 64, 8, 3),
    (128, 256, 64, 8, 4), (256, 128, 64, 8, 3), (256, 128, 64, 8, 4), (128, 256, 32, 8, 4),
]


def _mm_launch(module, a: dict, cfg: tuple[int, ...], persistent: bool) -> dict:
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
    _launched(module.matmul_fwd_kernel[(min(extra.get("NUM_SMS", tiles), tiles),)](
        x, y, c, M, N, K, x.stride(0), x.stride(1), y.stride(0), y.stride(1), c.stride(0), c.stride(1),
        BM=BM, BN=BN, BK=BK, GROUP_M=8, **extra, num_warps=warps, num_stages=stages))
    return {"c": c}


def mm_variants(ctx: Ctx) -> list[Variant]:
    import torch

    vs = [Variant("torch.matmul", "upstream", lambda a: {"c": torch.matmul(a["a"], a["b"])}, f"torch {torch.__version__}")]
    if ctx.sweep:
        for label, persistent in (("grouped", False), ("persistent", True)):
            module = ctx.steps[label].module
            vs += [Variant(f"{label} {'x'.join(map(str, c[:3]))} w={c[3]} s={c[4]}", "sweep",
                           lambda a, module=module, c=c, p=persistent: _mm_launch(module, a, c, p),
                           f"{label} kernel, BM,BN,BK={c[:3]}, num_warps={c[3]}, num_stages={c[4]}") for c in MM_CONFIGS]
    return vs


EXTRA = {"kda_decode": kda_variants, "cp_state_merge": cp_variants, "decode_attention": decode_variants, "matmul": mm_variants}


def variants(ctx: Ctx) -> list[Variant]:
    vs = [_impl_variant(ctx, "baseline", "baseline", ctx.baseline, "kernels/%s/baseline.py" % ctx.op)]
    vs += [_impl_variant(ctx, label, "step", impl, ctx.sources[label]["chain"]) for label, impl in ctx.steps.items()]
    return vs + EXTRA[ctx.op](ctx)


# --------------------------------------------------------------------------------------
# measuring one case
# --------------------------------------------------------------------------------------


def _ratio(times: dict[str, np.ndarray], fast: str, slow: str) -> dict[str, Any]:
    """How many times faster `fast` is than `slow`, per round, with its bootstrap 95% interval."""
    from patterns.core.stats import bootstrap_ci

    r = times[slow] / times[fast]
    lo, hi = bootstrap_ci(r)
    return {"median": float(np.median(r)), "ci95": [lo, hi]}


def check_variants(vs: list[Variant], inputs: dict, want: dict, tol, device: str, log) -> dict[str, dict]:
    """Run each variant once on fresh copies of `inputs` and compare with the reference's `want`."""
    from patterns.validation.runner import clone_inputs, sync

    out = {}
    for v in vs:
        entry = out[v.name] = {"role": v.role, "note": v.note}
        _LAST_LAUNCH.clear()
        try:
            args = clone_inputs(inputs)
            got = v.outputs(v.launch(args), args)
            sync(device)
            if _LAST_LAUNCH and device != "cpu":
                entry["resources"] = _resources(_LAST_LAUNCH[0])
            chosen = _autotuned(v.module)
            if chosen:
                entry["autotuned"] = chosen
        except Exception as e:  # noqa: BLE001 - a launch that does not compile (too much shared memory) is a finding
            entry["error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
            log(f"  {v.name}: {entry['error']}")
            continue
        entry["abs_err"], entry["rel_err"], bad = compare(got, want, tol)
        entry["correct"] = bad is None
        if bad is not None:
            entry["mismatch"] = bad
            log(f"  {v.name}: wrong: {bad}")
        del got, args
    return out


def compare(got: dict, want: dict, tol) -> tuple[float, float, str | None]:
    """(max abs error, max abs error / max |reference|, first failing output or None), on the tensors' device:
    the GPU shapes hold gigabytes, too many to copy to the host for every variant."""
    worst_abs = worst_rel = 0.0
    bad = None
    for name, w in want.items():
        g = got.get(name)
        if g is None or g.shape != w.shape:
            return float("inf"), float("inf"), f"{name}: shape {None if g is None else tuple(g.shape)} vs {tuple(w.shape)}"
        g, w = g.float(), w.float()
        nan = g.isnan() != w.isnan()
        if bool(nan.any()):
            return float("nan"), float("nan"), f"{name}: NaN where the reference has none (or the reverse)"
        diff = (g - w).abs().nan_to_num(0.0)
        worst_abs = max(worst_abs, float(diff.max()))
        worst_rel = max(worst_rel, float(diff.max()) / max(float(w.nan_to_num(0.0).abs().max()), 1e-30))
        over = diff > tol.atol + tol.rtol * w.abs().nan_to_num(0.0)
        if bad is None and bool(over.any()):
            i = int(over.flatten().nonzero()[0])
            bad = f"{name}[{i}] = {float(g.flatten()[i]):.6g} vs reference {float(w.flatten()[i]):.6g} (atol {tol.atol:g} + rtol {tol.rtol:g}*|ref|)"
    return worst_abs, worst_rel, bad


def smoke(op: str, log=print) -> dict[str, dict]:
    """Every variant of `op` (sweeps included) once on the CPU interpreter at the op's first CPU shape, against
    the reference: the code paths of a GPU run, checked where there is no GPU. FLA variants need fla-core."""
    from patterns.core.ops import load_reference, load_spec
    from patterns.validation.runner import call_reference

    from patterns.core import interpreter

    os.environ["TRITON_INTERPRET"] = "1"
    interpreter.install_cpu_shims()
    spec = load_spec(op)
    ctx = Ctx(op, spec, "cpu", sweep=True)
    with tempfile.TemporaryDirectory() as tmp:
        load_candidates(ctx, Path(tmp), {})
        dtype = spec.dtypes[0]
        inputs = spec.make_inputs(dict(spec.shapes[0]), dtype, spec.seeds[0], "cpu")
        want = call_reference(spec, load_reference(spec), inputs)
        return check_variants(variants(ctx), inputs, want, spec.tolerance[dtype], "cpu", log)


def measure(ctx: Ctx, shape: dict, dtype: str, rounds: int, ceilings: dict, log: Callable[[str], None]) -> dict[str, Any]:

    from patterns.core.ops import load_reference
    from patterns.validation.perf import time_interleaved
    from patterns.validation.runner import call_reference, clone_inputs, shape_label

    spec = ctx.spec
    inputs = spec.make_inputs(dict(shape), dtype, spec.seeds[0], ctx.device)
    want = call_reference(spec, load_reference(spec), inputs)
    tol = spec.tolerance[dtype]
    vs = variants(ctx)
    row: dict[str, Any] = {"shape": shape, "dtype": dtype, "label": shape_label(shape, dtype), "variants": {}}
    if spec.bytes_moved:
        row["bytes"] = spec.bytes_moved(dict(shape), dtype)
        row["limit_us"] = row["bytes"] / (ceilings["copy_GBps"] * 1e9) * 1e6
    if spec.flops:
        row["flops"] = spec.flops(dict(shape), dtype)
        if spec.bound == "compute":
            row["limit_us"] = row["flops"] / (ceilings["matmul_TFLOPs"] * 1e12) * 1e6
    row["variants"] = check_variants(vs, inputs, want, tol, ctx.device, log)
    timed = [v for v in vs if "error" not in row["variants"][v.name]]
    del want
    shared = clone_inputs(inputs)  # one input set for every timed variant: an L2 flush precedes each launch
    del inputs
    times, inners = time_interleaved({v.name: (lambda v=v: v.launch(shared)) for v in timed}, ctx.device, rounds)
    for v in timed:
        entry = row["variants"][v.name]
        us = times[v.name] * 1e3
        entry.update(us=float(np.median(us)), us_rounds=[round(float(x), 4) for x in us], launches_per_graph=inners[v.name])
        if "bytes" in row:
            entry["GBps"] = row["bytes"] / (entry["us"] * 1e-6) / 1e9
            entry["fraction_of_copy"] = entry["GBps"] / ceilings["copy_GBps"]
        if "flops" in row:
            entry["TFLOPs"] = row["flops"] / (entry["us"] * 1e-6) / 1e12
            entry["fraction_of_matmul"] = entry["TFLOPs"] / ceilings["matmul_TFLOPs"]
    names = [v.name for v in timed]
    ratios = {}
    for v in timed:
        if v.role in ("step", "sweep", "upstream", "upstream-sweep"):
            ratios[f"{v.name} vs baseline"] = _ratio(times, v.name, "baseline")
    final = next(label for label in reversed(list(ctx.steps)) if label in names) if ctx.steps else None
    if final:
        for v in timed:
            if v.role == "upstream":
                ratios[f"{final} vs {v.name}"] = _ratio(times, final, v.name)
        ups = [v.name for v in timed if v.role == "upstream-sweep"]
        if ups:
            best = min(ups, key=lambda n: row["variants"][n]["us"])
            row["best_upstream_launch"] = best
            ratios[f"{final} vs best upstream launch"] = _ratio(times, final, best)
    row["ratios"] = ratios
    row["final"] = final
    return row


def run_case(op: str, out: Path, rounds: int, sweep: bool, overrides: dict[str, Path], warm_shard: tuple[int, int] | None) -> int:
    import torch
    from patterns.core.ops import load_spec
    from patterns.validation.perf import device_ceilings
    from patterns.validation.runner import active_dtypes, clone_inputs

    device = "cuda"
    spec = load_spec(op)
    ctx = Ctx(op, spec, device, sweep)
    work = Path(tempfile.mkdtemp(prefix=f"h200-{op}-"))  # candidate files: their sources go into the JSON
    load_candidates(ctx, work, overrides)
    dtype = active_dtypes(spec, device)[0]
    if warm_shard is not None:  # compile every variant once at every shape; nothing is recorded
        i, n = warm_shard
        for shape in spec.gpu_shapes:
            inputs = spec.make_inputs(dict(shape), dtype, spec.seeds[0], device)
            for j, v in enumerate(variants(ctx)):
                if j % n == i:
                    try:
                        v.launch(clone_inputs(inputs))
                    except Exception:  # noqa: BLE001 - the timed process records it
                        pass
            torch.cuda.synchronize()
            del inputs
        return 0
    log = lambda s: print(s, flush=True)  # noqa: E731
    t0 = time.time()
    ceilings = device_ceilings(device, dtype)
    log(f"[{op}] {torch.cuda.get_device_name()}: copy {ceilings['copy_GBps']:.0f} GB/s, bf16 matmul {ceilings['matmul_TFLOPs']:.0f} TFLOP/s")
    rows = []
    for shape in spec.gpu_shapes:
        row = measure(ctx, dict(shape), dtype, rounds, ceilings, log)
        rows.append(row)
        _print_row(op, row, log)
        torch.cuda.empty_cache()
    result = {
        "op": op, "device": torch.cuda.get_device_name(), "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "environment": _environment(), "ceilings": ceilings, "rounds": rounds, "sweep": sweep,
        "steps": ctx.sources, "rows": rows, "seconds": round(time.time() - t0, 1),
        "command": f"python -m patterns.validation.h200_cases --out DIR --cases {op}" + (f" --sweep {op}" if sweep else "")
        + "".join(f" --candidate {k}={v}" for k, v in overrides.items() if k == op),
    }
    if spec.partition is not None:
        result["partition"] = partition_curves(ctx)
    result["targets"] = TARGETS[op](result)
    for t in result["targets"]:
        log(f"[{op}] target {'met' if t['met'] else 'MISSED'}: {t['what']}: {t['measured']}")
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(out / f"{op}.json", json.dumps(result, indent=1))
    return 0


def partition_curves(ctx: Ctx) -> dict[str, Any]:
    """The partitioned-vs-unpartitioned error curve of the baseline and of the final step."""
    from patterns.core.ops import load_reference
    from patterns.validation.partition import check_partition

    final = list(ctx.steps)[-1]
    checks = check_partition(ctx.spec, ctx.baseline, ctx.steps[final], load_reference(ctx.spec), ctx.device)
    c = checks[0]
    return {**c.details, "step": final, "passed": c.passed, "reason": c.reason, "shape": c.shape}


def _print_row(op: str, row: dict, log) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{op} {row['label']} (limit {row.get('limit_us', float('nan')):.1f} us)")
    for col in ("variant", "role", "us", "achieved", "vs baseline", "rel err"):
        table.add_column(col)
    for name, e in sorted(row["variants"].items(), key=lambda kv: kv[1].get("us", 1e30)):
        if "us" not in e:
            table.add_row(name, e["role"], "-", e.get("error", ""), "", "")
            continue
        ach = f"{e['fraction_of_matmul']:.0%} mm" if op == "matmul" else f"{e.get('fraction_of_copy', 0):.0%} copy"
        r = row["ratios"].get(f"{name} vs baseline")
        table.add_row(name, e["role"], f"{e['us']:.2f}", ach, f"{r['median']:.3f}" if r else "", f"{e['rel_err']:.1e}" + ("" if e["correct"] else " !"))
    Console(width=140).print(table)
    for k, r in row["ratios"].items():
        if " vs baseline" not in k:
            log(f"  {k}: {r['median']:.3f} [{r['ci95'][0]:.3f}, {r['ci95'][1]:.3f}]")


# --------------------------------------------------------------------------------------
# targets of issue #8, evaluated on the measurements
# --------------------------------------------------------------------------------------


def _target(what: str, met: bool, measured: str, **extra) -> dict[str, Any]:
    return {"what": what, "met": bool(met), "measured": measured, **extra}


def _ratio_target(what: str, r: dict, at_least: float) -> dict[str, Any]:
    """Met when the median ratio reaches `at_least`; a miss whose 95% interval still reaches it is a tie within noise."""
    met = r["median"] >= at_least
    note = "" if met or r["ci95"][1] < at_least else f" (a tie: the 95% interval reaches {at_least:g})"
    return _target(what, met, _fmt_ratio(r) + note)


def _fmt_ratio(r: dict) -> str:
    return f"{r['median']:.3f} [{r['ci95'][0]:.3f}, {r['ci95'][1]:.3f}]"


def kda_targets(res: dict) -> list[dict]:
    out = []
    for row in res["rows"]:
        B, f = row["shape"]["B"], row["final"]
        e = row["variants"][f]
        if B >= 128:
            out.append(_target(f"B={B}: >= 90% of copy bandwidth", e["fraction_of_copy"] >= 0.90, f"{e['fraction_of_copy']:.1%}"))
        r = row["ratios"].get(f"{f} vs FLA default")
        if r:
            out.append(_ratio_target(f"B={B}: >= 1.15x FLA default", r, 1.15))
        r = row["ratios"].get(f"{f} vs best upstream launch")
        if r:
            out.append(_ratio_target(f"B={B}: >= FLA's best launch ({row['best_upstream_launch']})", r, 1.0))
    return out


def cp_targets(res: dict) -> list[dict]:
    out = []
    part = res.get("partition")
    if part:
        base = {p["n"]: p for p in part["baseline"]}
        cand = {p["n"]: p for p in part["candidate"]}
        fails = all(not base[n].get("passed", False) for n in base if n >= 64)
        out.append(_target("default precision fails the partition check from 64 merges", fails,
                           ", ".join(f"n={n}: {base[n].get('rel_err', float('nan')):.1e}" for n in sorted(base))))
        out.append(_target("tf32x3 passes it at every count", bool(part["passed"]),
                           ", ".join(f"n={n}: {cand[n].get('rel_err', float('nan')):.1e}" for n in sorted(cand))))
    for row in res["rows"]:
        if row["shape"]["N"] in (64, 512) and row["shape"]["K"] == 128:
            r = row["ratios"][f"{row['final']} vs baseline"]
            cost = 1 / r["median"]
            out.append(_target(f"N={row['shape']['N']}: tf32x3 costs <= 1.5x the TF32 time", cost <= 1.5,
                               f"{cost:.2f}x (ratio {_fmt_ratio(r)})"))
    return out


def decode_targets(res: dict) -> list[dict]:
    from patterns.validation.perf import NOISE_FLOOR

    out = []
    for row in res["rows"]:
        B = row["shape"]["B"]
        r = row["ratios"][f"{row['final']} vs baseline"]
        page = f"page {row['shape']['PAGE']}" if row["shape"].get("PAGE") else "contiguous"
        if B <= 8:
            out.append(_ratio_target(f"B={B} {page}: >= 2x the unsplit baseline", r, 2.0))
        if B >= 64:
            out.append(_target(f"B={B} {page}: never slower than the baseline (noise floor {NOISE_FLOOR:.0%})",
                               r["median"] >= 1 - NOISE_FLOOR, _fmt_ratio(r)))
    return out


def mm_targets(res: dict) -> list[dict]:
    out = []
    for row in res["rows"]:
        r = row["ratios"].get(f"{row['final']} vs torch.matmul")
        if r:
            s = row["shape"]
            out.append(_ratio_target(f"{s['M']}x{s['N']}x{s['K']}: >= 85% of torch.matmul's rate", r, 0.85))
    return out


TARGETS = {"kda_decode": kda_targets, "cp_state_merge": cp_targets, "decode_attention": decode_targets, "matmul": mm_targets}


# --------------------------------------------------------------------------------------
# the command
# --------------------------------------------------------------------------------------


def _environment() -> dict[str, str]:
    import torch
    import triton

    env = {"torch": torch.__version__, "triton": triton.__version__, "cuda": str(torch.version.cuda)}
    try:
        import fla

        env["fla"] = fla.__version__
    except ImportError:
        pass
    return env


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="folder for <op>.json")
    parser.add_argument("--cases", default=",".join(CASES), help=f"comma-separated ops (default: {','.join(CASES)})")
    parser.add_argument("--rounds", type=int, default=15, help="interleaved timing rounds")
    parser.add_argument("--sweep", nargs="?", const="all", default="", metavar="CASES",
                        help="add launch-parameter variants of the kernels (of every case, or of the comma-separated CASES)")
    parser.add_argument("--candidate", action="append", default=[], metavar="OP=PATH", help="an accepted candidate replacing OP's last step")
    parser.add_argument("--warm-workers", type=int, default=0, help="compile every variant in N parallel processes first")
    parser.add_argument("--case", help=argparse.SUPPRESS)  # one case, in this process
    parser.add_argument("--warm-shard", help=argparse.SUPPRESS)  # i/n: compile only
    args = parser.parse_args(argv)
    cases = [c for c in args.cases.split(",") if c]
    unknown = [c for c in cases if c not in CASES]
    if unknown:
        print(f"error: --cases: unknown case {unknown[0]} (cases: {', '.join(CASES)})", file=sys.stderr)
        return 2
    overrides = {}
    for item in args.candidate:
        op, sep, path = item.partition("=")
        if not sep or op not in CASES or not Path(path).is_file():
            print(f"error: --candidate {item}: expected OP=PATH with OP one of {', '.join(CASES)} and an existing file", file=sys.stderr)
            return 2
        overrides[op] = Path(path).resolve()
    import torch

    if not torch.cuda.is_available() or os.environ.get("TRITON_INTERPRET") == "1":
        print("error: no CUDA device (or TRITON_INTERPRET=1): these cases are timed on a GPU only", file=sys.stderr)
        return 2
    if args.case:
        shard = tuple(int(x) for x in args.warm_shard.split("/")) if args.warm_shard else None
        sweep = args.sweep == "all" or args.case in args.sweep.split(",")
        return run_case(args.case, args.out, args.rounds, sweep, overrides, shard)  # type: ignore[arg-type]
    base = [sys.executable, "-m", "patterns.validation.h200_cases", "--out", str(args.out), "--rounds", str(args.rounds)]
    base += [f"--sweep={args.sweep}"] if args.sweep else []
    base += [f"--candidate={k}={v}" for k, v in overrides.items()]
    if args.warm_workers:
        per = max(1, args.warm_workers // len(cases))
        procs = [subprocess.Popen([*base, "--case", c, "--warm-shard", f"{i}/{per}"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
                 for c in cases for i in range(per)]
        t0 = time.time()
        for p in procs:
            _, err = p.communicate()
            if p.returncode:
                print(f"warning: a compile worker exited {p.returncode}: {err.decode()[-300:]}", file=sys.stderr)
        print(f"compiled every variant in {len(procs)} processes: {time.time() - t0:.0f} s", flush=True)
    failed = 0
    for c in cases:
        failed |= subprocess.call([*base, "--case", c]) != 0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
