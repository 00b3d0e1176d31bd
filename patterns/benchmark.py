"""Each benchmarked op on one GPU: its baseline, the rewrites' candidates and upstream, side by side.

    python -m patterns.benchmark --out DIR [--cases kda_decode,cp_state_merge,decode_attention,matmul]
        [--rounds 15] [--sweep [CASES]] [--candidate OP=PATH ...] [--warm-workers 12]

What is timed for an op is its `kernels/<op>/benchmark.py` (patterns.core.benchspec):
every candidate is what the rewrites produce, each step a chain of `patterns
apply` calls on kernels/<op>/baseline.py run here, its source kept in the JSON;
besides them upstream (FLA 0.6.0's `fused_recurrent_kda` for KDA, torch.matmul
for GEMM) and, with `--sweep`, the kernels at other launch parameters (the
evidence behind the rewrites' launch heuristics). `--candidate OP=PATH` replaces
an op's last step with a file (an accepted review item). The limit is the
device-to-device copy bandwidth or the bf16 matmul rate measured in the same
process.

Each case runs in a process of its own: inputs from the op's spec at its GPU
shapes, every implementation checked against the op's reference on those inputs,
then all of them timed interleaved (validation/perf.py: CUDA graphs, L2 flushed
before every launch, rotating order), ratios per round with bootstrap intervals.
`--warm-workers N` compiles every variant in N parallel processes first, so the
timed processes find Triton's cache warm. Writes DIR/<op>.json;
`python -m patterns.validation.benchmarks_report` renders them.

An entry point: it composes the rewriter (the candidates) with the gate's
timing and checks.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

import numpy as np

from patterns.core.benchspec import Chain, Context, Variant, last_launch
from patterns.core.files import write_atomic

MODULE = "patterns.benchmark"


# --------------------------------------------------------------------------------------
# candidates: the rewrites applied to the baseline
# --------------------------------------------------------------------------------------


def apply_chain(op: str, chain: Chain, dest: Path) -> str:
    """Apply `chain` to kernels/<op>/baseline.py as `patterns apply` would; write and return the result."""
    from patterns.core.ops import load_spec, source_path
    from patterns.rewriter.base import apply

    spec = load_spec(op)
    source = source_path(spec, spec.baseline).read_text()
    for pattern, params in chain:
        source = apply(pattern, source, str(dest), params=params).candidate.source
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(source)
    return source


@dataclass
class Loaded:
    """An implementation the benchmark runs in this process: the baseline, the rewrites' candidates
    (the project's own code) or an accepted review item. `module` is the imported file, whose kernels
    an op's benchmark also launches at other parameters; `impl` is the gate's handle on it, through
    which the partition check calls it (outputs NaN-poisoned)."""

    impl: Any  # patterns.validation.loader.Impl, hosted by a sandbox.InProcess of its own
    module: ModuleType

    @property
    def launcher(self) -> Callable[..., Any]:
        """The launcher itself: what is timed, with nothing of the gate's around it."""
        return getattr(self.module, self.impl.launcher_name)


def load_here(ctx: Context, role: str, path: Path) -> Loaded:
    """Import `path` in this process through the gate's loader (its errors: one line, GateInputError)."""
    from patterns.validation.loader import load_impl
    from patterns.validation.sandbox import InProcess

    host = InProcess(ctx.device)  # one per file: an InProcess holds one implementation per role
    impl, _ = load_impl(ctx.spec, role, path, host)
    return Loaded(impl, sys.modules[host.modules[role].__module__])


def load_candidates(ctx: Context, work: Path, overrides: dict[str, Path]) -> None:
    from patterns.core.ops import load_benchmark, source_path

    bench = load_benchmark(ctx.op)
    ctx.baseline = load_here(ctx, "baseline", source_path(ctx.spec, ctx.spec.baseline))
    for i, step in enumerate(bench.steps):
        path = work / f"{ctx.op}--{step.label}.py"
        if i == len(bench.steps) - 1 and ctx.op in overrides:
            path = overrides[ctx.op]
            ctx.sources[step.label] = {"chain": "accepted candidate", "path": str(path), "source": path.read_text()}
        else:
            ctx.sources[step.label] = {"chain": chain_text(step.chain), "hypothesis": step.hypothesis,
                                       "source": apply_chain(ctx.op, step.chain, path)}
        ctx.steps[step.label] = load_here(ctx, "candidate", path)
    if ctx.sweep:
        for label, chain in bench.sweeps:
            path = work / f"{ctx.op}--{label.replace(' ', '_')}.py"
            apply_chain(ctx.op, chain, path)
            ctx.sweeps[label] = load_here(ctx, "candidate", path)


def chain_text(chain: Chain) -> str:
    return " | ".join(" ".join([f"patterns apply {p}", *(f"--param {k}={v}" for k, v in params.items())]) for p, params in chain)


def _impl_variant(ctx: Context, name: str, role: str, impl: Loaded, note: str = "") -> Variant:
    from patterns.validation.runner import collect

    return Variant(name, role, lambda a, impl=impl: impl.launcher(**a), note, outputs=lambda ret, a: collect(ctx.spec, ret, a),
                   module=impl.module)


def variants(ctx: Context) -> list[Variant]:
    """The baseline, every step, every swept chain, then the op's own variants (upstream, launch sweeps)."""
    from patterns.core.ops import load_benchmark

    vs = [_impl_variant(ctx, "baseline", "baseline", ctx.baseline, "kernels/%s/baseline.py" % ctx.op)]
    vs += [_impl_variant(ctx, label, "step", impl, ctx.sources[label]["chain"]) for label, impl in ctx.steps.items()]
    vs += [_impl_variant(ctx, label, "sweep", impl, label) for label, impl in ctx.sweeps.items()]
    return vs + load_benchmark(ctx.op).variants(ctx)


# --------------------------------------------------------------------------------------
# what a variant's compiled kernel uses, and what an autotuner chose
# --------------------------------------------------------------------------------------


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
        last_launch(clear=True)
        try:
            args = clone_inputs(inputs)
            got = v.outputs(v.launch(args), args)
            sync(device)
            if last_launch() is not None and device != "cpu":
                entry["resources"] = _resources(last_launch())
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
    """(max abs error, max abs error / max |reference|, first failing output or None), on the tensors'
    device (the GPU shapes hold gigabytes): patterns.core.compare decides, as everywhere."""
    from patterns.core.compare import ResultError, errors, first_mismatch

    try:
        bad = first_mismatch(got, want, tol)
    except ResultError as e:
        return float("inf"), float("inf"), str(e)
    worst_abs, worst_rel = errors(got, want)
    return worst_abs, worst_rel, bad.describe(tol) if bad else None


def smoke(op: str, log=print) -> dict[str, dict]:
    """Every variant of `op` (sweeps included) once on the CPU interpreter at the op's first CPU shape, against
    the reference: the code paths of a GPU run, checked where there is no GPU. FLA variants need fla-core."""
    from patterns.core import interpreter
    from patterns.core.ops import load_reference, load_spec
    from patterns.validation.runner import call_reference

    os.environ["TRITON_INTERPRET"] = "1"
    interpreter.install_cpu_shims()
    spec = load_spec(op)
    ctx = Context(op, spec, "cpu", sweep=True)
    with tempfile.TemporaryDirectory() as tmp:
        load_candidates(ctx, Path(tmp), {})
        dtype = spec.dtypes[0]
        inputs = spec.make_inputs(dict(spec.shapes[0]), dtype, spec.seeds[0], "cpu")
        want = call_reference(spec, load_reference(spec), inputs)
        return check_variants(variants(ctx), inputs, want, spec.tolerance[dtype], "cpu", log)


def measure(ctx: Context, shape: dict, dtype: str, rounds: int, ceilings: dict, log: Callable[[str], None]) -> dict[str, Any]:
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

    from patterns.core.ops import load_benchmark, load_spec
    from patterns.validation.perf import device_ceilings
    from patterns.validation.runner import active_dtypes, clone_inputs

    device = "cuda"
    spec = load_spec(op)
    ctx = Context(op, spec, device, sweep)
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
        _print_row(op, spec.bound, row, log)
        torch.cuda.empty_cache()
    result = {
        "op": op, "device": torch.cuda.get_device_name(), "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "environment": _environment(), "ceilings": ceilings, "rounds": rounds, "sweep": sweep,
        "steps": ctx.sources, "rows": rows, "seconds": round(time.time() - t0, 1),
        "command": f"python -m {MODULE} --out DIR --cases {op}" + (f" --sweep {op}" if sweep else "")
        + "".join(f" --candidate {k}={v}" for k, v in overrides.items() if k == op),
    }
    if spec.partition is not None:
        result["partition"] = partition_curves(ctx)
    result["targets"] = load_benchmark(op).targets(result)
    for t in result["targets"]:
        log(f"[{op}] target {'met' if t['met'] else 'MISSED'}: {t['what']}: {t['measured']}")
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(out / f"{op}.json", json.dumps(result, indent=1))
    return 0


def partition_curves(ctx: Context) -> dict[str, Any]:
    """The partitioned-vs-unpartitioned error curve of the baseline and of the final step."""
    from patterns.core.ops import load_reference
    from patterns.validation.partition import check_partition

    final = list(ctx.steps)[-1]
    checks = check_partition(ctx.spec, ctx.baseline.impl, ctx.steps[final].impl, load_reference(ctx.spec), ctx.device)
    c = checks[0]
    return {**c.details, "step": final, "passed": c.passed, "reason": c.reason, "shape": c.shape}


def _print_row(op: str, bound: str, row: dict, log) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{op} {row['label']} (limit {row.get('limit_us', float('nan')):.1f} us)")
    for col in ("variant", "role", "us", "achieved", "vs baseline", "rel err"):
        table.add_column(col)
    for name, e in sorted(row["variants"].items(), key=lambda kv: kv[1].get("us", 1e30)):
        if "us" not in e:
            table.add_row(name, e["role"], "-", e.get("error", ""), "", "")
            continue
        ach = f"{e['fraction_of_matmul']:.0%} mm" if bound == "compute" else f"{e.get('fraction_of_copy', 0):.0%} copy"
        r = row["ratios"].get(f"{name} vs baseline")
        table.add_row(name, e["role"], f"{e['us']:.2f}", ach, f"{r['median']:.3f}" if r else "", f"{e['rel_err']:.1e}" + ("" if e["correct"] else " !"))
    Console(width=140).print(table)
    for k, r in row["ratios"].items():
        if " vs baseline" not in k:
            log(f"  {k}: {r['median']:.3f} [{r['ci95'][0]:.3f}, {r['ci95'][1]:.3f}]")


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
    from patterns.core.ops import benchmarked_ops

    cases_known = benchmarked_ops()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="folder for <op>.json")
    parser.add_argument("--cases", default=",".join(cases_known), help=f"comma-separated ops (default: {','.join(cases_known)})")
    parser.add_argument("--rounds", type=int, default=15, help="interleaved timing rounds")
    parser.add_argument("--sweep", nargs="?", const="all", default="", metavar="CASES",
                        help="add launch-parameter variants of the kernels (of every case, or of the comma-separated CASES)")
    parser.add_argument("--candidate", action="append", default=[], metavar="OP=PATH", help="an accepted candidate replacing OP's last step")
    parser.add_argument("--warm-workers", type=int, default=0, help="compile every variant in N parallel processes first")
    parser.add_argument("--case", help=argparse.SUPPRESS)  # one case, in this process
    parser.add_argument("--warm-shard", help=argparse.SUPPRESS)  # i/n: compile only
    args = parser.parse_args(argv)
    cases = [c for c in args.cases.split(",") if c]
    unknown = [c for c in cases if c not in cases_known]
    if unknown:
        print(f"error: --cases: unknown case {unknown[0]} (cases: {', '.join(cases_known)})", file=sys.stderr)
        return 2
    overrides = {}
    for item in args.candidate:
        op, sep, path = item.partition("=")
        if not sep or op not in cases_known or not Path(path).is_file():
            print(f"error: --candidate {item}: expected OP=PATH with OP one of {', '.join(cases_known)} and an existing file", file=sys.stderr)
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
    base = [sys.executable, "-m", MODULE, "--out", str(args.out), "--rounds", str(args.rounds)]
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
