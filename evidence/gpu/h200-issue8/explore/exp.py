"""Scratch experiments for issue #8 (not part of the project): kernel-body variants timed side by side."""
import sys, importlib, time
from pathlib import Path
import numpy as np
import torch
from patterns.validation.loader import load_spec, load_impl, load_reference
from patterns.validation.runner import call_reference, clone_inputs
from patterns.validation.perf import time_interleaved
from patterns.validation import h200_cases as hc

ROUNDS = 12
V = Path(".gpurun/v")


def run(op, shape, variants, ref_name, dtype="bfloat16"):
    spec = load_spec(op)
    inputs = spec.make_inputs(dict(shape), dtype, spec.seeds[0], "cuda")
    want = call_reference(spec, load_reference(spec), inputs)
    ok = {}
    for name, fn in variants.items():
        try:
            args = clone_inputs(inputs)
            got = fn(args)
            torch.cuda.synchronize()
            a, r, bad = hc.compare(got, want, spec.tolerance[dtype])
            ok[name] = fn
            if bad:
                print(f"  {name}: WRONG {bad}", flush=True)
        except Exception as e:
            print(f"  {name}: ERROR {type(e).__name__}: {str(e)[:300]}", flush=True)
    del want
    shared = clone_inputs(inputs)
    times, _ = time_interleaved({n: (lambda f=f: f(shared)) for n, f in ok.items()}, "cuda", ROUNDS)
    print(f"== {op} {shape}", flush=True)
    for n in sorted(ok, key=lambda n: np.median(times[n])):
        r = hc._ratio(times, n, ref_name) if ref_name in times else {"median": float("nan"), "ci95": [0, 0]}
        print(f"  {n:36s} {np.median(times[n])*1e3:9.2f} us   vs {ref_name}: {r['median']:.3f} [{r['ci95'][0]:.3f}, {r['ci95'][1]:.3f}]", flush=True)


def outputs_kda(o, a):
    return {"o": o, "state": a["state"]}


def kda():
    spec = load_spec("kda_decode")
    mods = {n: load_impl(spec, "candidate", V / f"{n}.py") for n in ("kda_base", "kda_softplus", "kda_evict", "kda_both")}
    fla_best = {1: [(16, 1), (8, 1)], 8: [(32, 1), (16, 1)], 32: [(32, 2), (32, 1)], 128: [(32, 2), (32, 1)], 512: [(32, 1), (32, 2)]}
    ours_extra = {1: [(8, 1), (16, 2), (32, 2)], 8: [(32, 1), (16, 1)], 32: [(32, 2), (32, 1), (64, 2)], 128: [(32, 2), (64, 2)], 512: [(32, 1), (64, 2)]}
    for B in (1, 8, 32, 128, 512):
        shape = next(s for s in spec.gpu_shapes if s["B"] == B)
        vs = {}
        for n, impl in mods.items():
            vs[n] = lambda a, impl=impl: outputs_kda(impl.launcher(**a), a)
        for bv, w in ours_extra[B]:
            for n in ("kda_base", "kda_both"):
                def f(a, impl=mods[n], bv=bv, w=w):
                    impl.module.FORCE = (bv, w)
                    try:
                        return outputs_kda(impl.launcher(**a), a)
                    finally:
                        impl.module.FORCE = None
                vs[f"{n} BV={bv} w={w}"] = f
        for bv, w in fla_best[B]:
            vs[f"FLA BV={bv} w={w}"] = lambda a, bv=bv, w=w: hc._fla_kernel(a, bv, w)
        run("kda_decode", shape, vs, f"FLA BV={fla_best[B][0][0]} w={fla_best[B][0][1]}")


def matmul():
    from patterns.validation.h200_cases import apply_chain
    spec = load_spec("matmul")
    work = Path("/tmp/mm"); work.mkdir(exist_ok=True)
    chains = {"grouped+hopper": (("grouped_pid_ordering", {}), ("autotune_configs_keys", {"space": "hopper"})),
              "hopper": (("autotune_configs_keys", {"space": "hopper"}),),
              "small": (("autotune_configs_keys", {"space": "small"}),)}
    impls = {}
    for n, c in chains.items():
        p = work / f"{n.replace('+', '_')}.py"
        apply_chain("matmul", c, p)
        impls[n] = load_impl(spec, "candidate", p)
    for shape in spec.gpu_shapes:
        vs = {"torch.matmul": lambda a: {"c": torch.matmul(a["a"], a["b"])}}
        for n, impl in impls.items():
            vs[n] = lambda a, impl=impl: {"c": impl.launcher(**a)}
        run("matmul", shape, vs, "torch.matmul")
        for n, impl in impls.items():
            print("   ", n, hc._autotuned(impl.module), flush=True)


def decode():
    spec = load_spec("decode_attention")
    split = load_impl(spec, "candidate", Path("evidence/gpu/h200-decode_attention/candidate-split-KV.py"))
    base = load_impl(spec, "baseline", Path("kernels/decode_attention/baseline.py"))
    g = load_impl(spec, "candidate", V / "dec_grouped.py")
    settings = {"g tf32 s16": (False, 16, 64, 4, 2), "g bf16 s16": (True, 16, 64, 4, 2), "g bf16 s32": (True, 32, 64, 4, 2),
                "g bf16 s64": (True, 64, 64, 4, 2), "g tf32 s32": (False, 32, 64, 4, 2), "g bf16 s32 st3": (True, 32, 64, 4, 3),
                "g bf16 s32 w8": (True, 32, 64, 8, 2)}
    for shape in spec.gpu_shapes:
        if shape["B"] not in (1, 8, 64):
            continue
        vs = {"baseline": lambda a: dict(zip(("o", "lse"), base.launcher(**a))),
              "split": lambda a: dict(zip(("o", "lse"), split.launcher(**a)))}
        for n, st in settings.items():
            def f(a, st=st):
                g.module.LOWP, g.module.MAX_SPLITS, g.module.PER_SM, g.module.WARPS, g.module.STAGES = st
                return dict(zip(("o", "lse"), g.launcher(**a)))
            vs[n] = f
        run("decode_attention", shape, vs, "baseline")




def kda2():
    spec = load_spec("kda_decode")
    names = ["kda_base", "kda_evict", "kda_e1d", "kda_estages", "kda_e1d_stages", "kda_ecm", "kda_ecm_store", "kda_e1d_stages_cm"]
    mods = {n: load_impl(spec, "candidate", V / f"{n}.py") for n in names}
    fla_best = {1: [(16, 1)], 8: [(32, 1)], 32: [(32, 2)], 128: [(32, 2)], 512: [(32, 1)]}
    for B in (1, 8, 32, 128, 512):
        shape = next(s for s in spec.gpu_shapes if s["B"] == B)
        vs = {n: (lambda a, impl=impl: outputs_kda(impl.launcher(**a), a)) for n, impl in mods.items()}
        for bv, w in fla_best[B]:
            vs[f"FLA BV={bv} w={w}"] = lambda a, bv=bv, w=w: hc._fla_kernel(a, bv, w)
        global ROUNDS
        ROUNDS = 20 if B <= 8 else 12
        run("kda_decode", shape, vs, f"FLA BV={fla_best[B][0][0]} w={fla_best[B][0][1]}")


if __name__ == "__main__":
    for what in sys.argv[1:]:
        t = time.time()
        globals()[what]()
        print(f"[{what}: {time.time() - t:.0f} s]", flush=True)
