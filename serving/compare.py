"""End to end, A against B: the engine with two bindings of ops interleaved in one process.

    reg = Registry()
    baseline = Arm("v1", bind_ops("live", reg, versions={op: 1 for op in OPS}))
    candidate = Arm("live", bind_ops("live", reg))
    result = compare(PRESETS["h200"], "cuda", baseline, candidate, shapes=[(1, 4096), (64, 32768)])

What a serving team reports, per shape (batch B, context L):

- output tokens/s of the batch while decoding, and the inter-token latency
  (p50, p99), for each arm; the candidate's tokens/s over the baseline's as the
  median of per-round ratios with a bootstrap 95% interval. Round r runs the
  arms in the order AB, round r + 1 in BA, so neither always runs first;
- time to first token, per context: one request's prompt of L tokens
  prefilled and its first token sampled (each arm its own prefill, interleaved);
- where each arm's step time goes (patterns.serving.profile): a torch.profiler
  trace of a few steps, per op, so a ratio that falls short of the kernels'
  own ratios shows which op still holds the step.

The batch at each shape is B copies of one prefilled request, each in its own
pages (`KVCache.fill_from`): the decode reads B * L distinct tokens of KV as B
requests would, without B prefills of L tokens. Both arms share the model's
weights and the cache; before every round the cache is restored to the
prefilled state (the KDA states, the lengths), so every round decodes the
same tokens from the same state. Each arm's steps are captured in a CUDA graph
of their own (`mode="graph"`, the default on a GPU) after a warm-up, or run
eagerly (`mode="eager"`, and always on a CPU: the same code path, interpreter
times, never a speed claim).
"""
from __future__ import annotations

import gc
import os
import re
import shutil
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Literal, Mapping

import numpy as np
import torch

from patterns.core.stats import bootstrap_ci
from patterns.core.records import ArmMeasure, ServingComparison, ShapeComparison, StepProfile, TTFTComparison
from patterns.serving.engine import BoundOp, Engine, EngineError, itl_percentiles, sync
from patterns.serving.graph import CaptureError, Decoder
from patterns.serving.model import OPS, PRESETS, HybridModel, KVCache, ModelConfig
from patterns.serving.profile import profile_steps, shares

STEPS, ROUNDS, TTFT_RUNS, PROFILE_STEPS = 16, 8, 3, 4
# per preset, (batches, contexts): for h200 the ops' GPU benchmark batches, a short and a long context
DEFAULT_SHAPES = {"h200": ((1, 8, 32, 64), (4096, 32768)), "small": ((1, 8, 32), (512, 4000)), "tiny": ((1, 4), (8, 32))}
# per preset, the checks' (batch, prompt, new tokens): the interpreter takes about a second a step of the tiny model
CHECK_SIZES = {"h200": {"verify": (8, 16, 4), "graph_vs_eager": (8, 64, 32)}, "small": {"verify": (8, 16, 4), "graph_vs_eager": (8, 64, 32)},
               "tiny": {"verify": (2, 4, 2), "graph_vs_eager": (3, 4, 3)}}
PROMPT_SEED = 0


@dataclass
class Arm:
    label: str
    ops: Mapping[str, BoundOp]


def against_versions(spec: str) -> dict[str, int]:
    """`v1` (every op at version 1) or `OP=N[,OP=N]`: the baseline arm's pinned versions (other ops live)."""
    if spec == "v1":
        return {op: 1 for op in OPS}
    pins = {}
    for part in spec.split(","):
        op, sep, version = part.strip().partition("=")
        if not sep or not version.removeprefix("v").isdigit():
            raise EngineError(f"--against: '{part}' is not OP=VERSION (e.g. kda_decode=2) or v1")
        pins[op] = int(version.removeprefix("v"))
    return pins


def _ttft(model: HybridModel, ops, prompt: torch.Tensor) -> tuple[float, KVCache, torch.Tensor]:
    """One request's time to first token (ms): its prefill and its first token on the host."""
    cache = model.new_cache(1, prompt.shape[1] + 1)
    sync(model.device)
    t0 = time.perf_counter()
    logits = model.prefill(prompt, cache, ops)
    logits.argmax(-1).cpu()
    return 1e3 * (time.perf_counter() - t0), cache, logits


def _decode_round(dec: Decoder, steps: int) -> list[float]:
    """Seconds from the round's start to each step's tokens reaching the host."""
    sync(dec.model.device)
    t0 = time.perf_counter()
    stamps = []
    for _ in range(steps):
        dec.step()
        dec.tokens.cpu()  # a server streams each token to its client
        stamps.append(time.perf_counter() - t0)
    return stamps


def _orders(labels: list[str], rounds: int) -> Iterable[list[str]]:
    for r in range(rounds):
        yield labels if r % 2 == 0 else labels[::-1]


def measure_shape(model: HybridModel, arms: list[Arm], src: KVCache, first: torch.Tensor, batch: int, steps: int, rounds: int,
                  mode: Literal["eager", "graph"], profile_n: int, trace_dir: Path | None) -> ShapeComparison:
    device = model.device
    cache = model.new_cache(batch, src.length + steps + 1)
    cache.fill_from(src)
    cache.reserve(steps)
    decs = {a.label: Decoder(model, cache, a.ops, capture=mode == "graph" and device.startswith("cuda")) for a in arms}
    for dec in decs.values():
        dec.tokens.copy_(first.expand(batch))
    snap = cache.snapshot()
    for dec in decs.values():
        dec.prepare()
        dec.step()  # untimed: an eager arm compiles its kernels for this batch, a graph's first replay uploads it
        cache.restore(snap)
        dec.tokens.copy_(first.expand(batch))
    stamps: dict[str, list[list[float]]] = {a.label: [] for a in arms}
    for order in _orders(list(decs), rounds):
        for label in order:
            cache.restore(snap)
            decs[label].tokens.copy_(first.expand(batch))
            stamps[label].append(_decode_round(decs[label], steps))
    measures = {}
    for label, runs in stamps.items():
        itl = [b - a for s in runs for a, b in zip([0.0, *s], s)]
        p50, p99 = itl_percentiles(itl)
        tps = [batch * steps / s[-1] for s in runs]
        measures[label] = ArmMeasure(tokens_per_s=statistics.median(tps), itl_ms_p50=p50, itl_ms_p99=p99, step_ms=[1e3 * s[-1] / steps for s in runs])
    base, cand = arms[0].label, arms[1].label
    ratios = np.array(measures[base].step_ms) / np.array(measures[cand].step_ms)
    lo, hi = bootstrap_ci(ratios)
    profiles = []
    for label, dec in decs.items():
        cache.restore(snap)
        dec.tokens.copy_(first.expand(batch))
        trace = trace_dir / f"trace-B{batch}-L{src.length}-{re.sub(r'[^A-Za-z0-9._-]', '-', label)}.json" if trace_dir else None
        step_ms = statistics.median(measures[label].step_ms)
        prof = profile_steps(dec.step, min(profile_n, steps), dec.ops, device, trace)
        source, rows = shares(prof, step_ms)
        replayed = dec.graph is not None
        if replayed and not any(r.ms_per_step > 0 for r in rows[:len(OPS)]):
            # a profiler that saw no kernel of the graph's replays: the same kernels, launched eagerly
            cache.restore(snap)
            dec.tokens.copy_(first.expand(batch))
            prof = profile_steps(lambda: dec.step(eager=True), min(profile_n, steps), dec.ops, device, trace)
            source, rows = shares(prof, step_ms)
            replayed = False
        profiles.append(StepProfile(arm=label, source=source, step_ms=step_ms, steps=prof.steps, replayed=replayed, ops=rows,
                                    trace=trace.name if trace else ""))
    cache.restore(snap)
    return ShapeComparison(batch=batch, context=src.length, steps=steps, arms=measures, ratio=float(np.median(ratios)), ci95=[lo, hi],
                           ratios=[float(r) for r in ratios], profiles=profiles)


def environment(device: str) -> dict:
    import triton

    env = {"torch": torch.__version__, "triton": triton.__version__, "cuda": torch.version.cuda, "cpu_count": os.cpu_count(),
           "interpreter": os.environ.get("TRITON_INTERPRET") == "1"}
    if device.startswith("cuda"):
        props = torch.cuda.get_device_properties(device)
        env.update(gpu=props.name, sms=props.multi_processor_count, memory_GiB=round(props.total_memory / 2**30, 1))
    return env


def compare(cfg: ModelConfig, device: str, baseline: Arm, candidate: Arm, shapes: Iterable[tuple[int, int]], *,
            mode: Literal["eager", "graph"] = "graph", steps: int = STEPS, rounds: int = ROUNDS, ttft_runs: int = TTFT_RUNS,
            profile_n: int = PROFILE_STEPS, trace_dir: Path | None = None, deadline: float | None = None,
            model: HybridModel | None = None, on_update: Callable[[ServingComparison], None] | None = None) -> ServingComparison:
    """Both arms at every (batch, context) shape, longest contexts and largest batches first (see the module doc).

    `deadline` (time.monotonic()) stops starting new shapes; a shape that runs out of
    memory or time, or fails (a step that cannot be captured, say), is recorded with its error. `trace_dir` keeps the Chrome traces of
    the best shape (the highest ratio); `on_update` sees the result after every shape.
    """
    model = model or HybridModel(cfg, device)
    arms = [baseline, candidate]
    preset = next((name for name, c in PRESETS.items() if c == cfg), "")
    result = ServingComparison(device=device, mode=mode, preset=preset, model=cfg.as_dict(), baseline=baseline.label, candidate=candidate.label,
                               arms={a.label: [op.record for op in a.ops.values()] for a in arms}, environment=environment(device))
    by_context: dict[int, list[int]] = {}
    for batch, context in shapes:
        by_context.setdefault(context, []).append(batch)
    scratch = Path(tempfile.mkdtemp(prefix="patterns-traces-")) if trace_dir else None
    try:
        with torch.inference_mode():
            for context in sorted(by_context, reverse=True):
                todo = sorted(set(by_context[context]), reverse=True)
                if deadline is not None and time.monotonic() > deadline:
                    result.shapes += [ShapeComparison(batch=b, context=context, steps=steps, error="not run: out of time") for b in todo]
                    continue
                prompt = torch.randint(0, cfg.vocab, (1, context), generator=torch.Generator().manual_seed(PROMPT_SEED)).to(device)
                runs: dict[str, list[float]] = {a.label: [] for a in arms}
                for a in arms:  # compiles and tunes every prefill kernel for this length
                    _ttft(model, a.ops, prompt)
                for order in _orders([a.label for a in arms], max(ttft_runs, 1)):
                    for label in order:
                        ms, src, logits = _ttft(model, next(a.ops for a in arms if a.label == label), prompt)
                        runs[label].append(ms)
                ttft_ratios = np.array(runs[baseline.label]) / np.array(runs[candidate.label])
                lo, hi = bootstrap_ci(ttft_ratios)
                result.ttft.append(TTFTComparison(context=context, arms=runs, ratio=float(np.median(ttft_ratios)), ci95=[lo, hi]))
                first = logits.argmax(-1)
                for batch in todo:
                    if deadline is not None and time.monotonic() > deadline:
                        result.shapes.append(ShapeComparison(batch=batch, context=context, steps=steps, error="not run: out of time"))
                        continue
                    try:
                        failed = ""
                        try:
                            shape = measure_shape(model, arms, src, first, batch, steps, rounds, mode, profile_n, scratch)
                        except CaptureError as exc:
                            failed = str(exc)  # the first attempt's cache is freed once the exception is gone
                        if failed:  # still worth measuring: at long contexts the kernels, not the host, set the pace
                            gc.collect()
                            shape = measure_shape(model, arms, src, first, batch, steps, rounds, "eager", profile_n, scratch)
                            shape.note = f"measured eagerly: {failed}"
                        result.shapes.append(shape)
                    except torch.cuda.OutOfMemoryError as exc:
                        result.shapes.append(ShapeComparison(batch=batch, context=context, steps=steps, error=f"out of memory: {str(exc).splitlines()[0]}"))
                    except Exception as exc:  # noqa: BLE001 - a capture or a kernel that fails at one shape is recorded; the others still run
                        result.shapes.append(ShapeComparison(batch=batch, context=context, steps=steps, error=f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0]}"))
                    finally:
                        gc.collect()
                        if device.startswith("cuda"):
                            torch.cuda.empty_cache()
                    if trace_dir is not None:
                        _keep_best_traces(result, scratch, trace_dir)
                    if on_update:
                        on_update(result)
                del src
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
    return result


def _keep_best_traces(result: ServingComparison, scratch: Path, trace_dir: Path) -> None:
    """The best shape so far keeps its traces in `trace_dir`; every other shape's are deleted (after each shape, so a run
    stopped from outside still leaves the best one it measured)."""
    best = result.best()
    for shape in result.shapes:
        for p in shape.profiles:
            if not p.trace:
                continue
            if shape is best:
                if (scratch / p.trace).exists():
                    trace_dir.mkdir(parents=True, exist_ok=True)
                    shutil.move(str(scratch / p.trace), trace_dir / p.trace)
            else:
                (scratch / p.trace).unlink(missing_ok=True)
                (trace_dir / p.trace).unlink(missing_ok=True)
                p.trace = ""


# ---------------------------------------------------------------------- checks
def check_verify(cfg: ModelConfig, device: str, registry, model: HybridModel, batch: int = 8, prompt_len: int = 16, new_tokens: int = 4) -> dict:
    """Every live op shadowed by its reference (eager), through a prefill and a few decode steps."""
    engine = Engine(cfg, impl="live", device=device, registry=registry, verify=True, mode="eager", model=model)
    report = engine.generate(engine.prompts(batch, prompt_len), new_tokens, warmup=False)
    return {"batch": batch, "prompt_len": prompt_len, "new_tokens": new_tokens, "passed": all(op.within_tolerance for op in report.ops),
            "ops": [op.model_dump() for op in report.ops]}


def check_graph_vs_eager(cfg: ModelConfig, device: str, registry, model: HybridModel, batch: int = 8, prompt_len: int = 64,
                         new_tokens: int = 32, versions: Mapping[str, int] | None = None) -> dict:
    """The same generation eagerly and through the graph path: identical tokens, and what the graph buys in tokens/s."""
    out: dict = {"batch": batch, "prompt_len": prompt_len, "new_tokens": new_tokens}
    tokens = {}
    for mode in ("eager", "graph"):
        engine = Engine(cfg, impl="live", device=device, registry=registry, mode=mode, model=model, versions=versions)
        report = engine.generate(engine.prompts(batch, prompt_len), new_tokens)
        tokens[mode] = report.tokens
        out[mode] = {"tokens_per_s": report.tokens_per_s, "itl_ms_p50": report.itl_ms_median, "itl_ms_p99": report.itl_ms_p99,
                     "ttft_ms": report.ttft_ms, "bucket": report.bucket}
        del engine  # its bucket's cache
        gc.collect()
    out["same_tokens"] = tokens["eager"] == tokens["graph"]
    return out
