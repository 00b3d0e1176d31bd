"""The serving engine: batched greedy generation with the hybrid decoder, through the registry's live ops.

    engine = Engine(PRESETS["tiny"], impl="live", device="cpu")
    report = engine.generate(prompts, new_tokens=16)      # EngineReport

A generation prefills the prompts (`HybridModel.prefill`, all tokens at once),
samples the first token, then decodes one token per sequence per step.
`mode` decides how the steps run:

- `graph`: the step of each batch-size bucket is captured in a CUDA graph
  once (patterns.serving.graph) and replayed; the batch is padded to its bucket;
- `eager`: every op is launched from Python each step, at the batch's own size;
  the path for the CPU, for `verify`, and for debugging;
- `auto` (default): graph on a GPU with live ops, eager otherwise.

On a CPU `graph` keeps the buckets and static buffers but has nothing to
capture: the same step runs eagerly.

`impl` decides where each op of the model comes from, in one place (`bind_ops`):

- `reference`: the op's plain PyTorch reference (kernels/<op>/naive.py);
- `live`: the version the serving registry holds live for the op
  (patterns.serving.registry), its Triton kernel; on a CPU it runs through
  Triton's interpreter. Promoting or rolling back a version in the registry
  changes what the engine runs on its next start, with no other edit;
- `auto`: live on a GPU, the references on a CPU.

With `verify`, every live call is shadowed by the reference on the same inputs
and compared within the op's tolerance (kernels/<op>/spec.py). The report says,
per op, which version ran, how often, and (verified) its largest error.
"""
from __future__ import annotations

import os
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Literal, Mapping

import torch

from patterns.core.records import EngineOp, EngineReport
from patterns.serving.graph import CaptureError, Decoder, bucket
from patterns.serving.model import OPS, HybridModel, ModelConfig

Impl = Literal["auto", "reference", "live"]
Mode = Literal["auto", "eager", "graph"]


class EngineError(ValueError):
    """Bad input to the engine: one line, CLI exit 2."""


@dataclass
class BoundOp:
    """One op as the engine calls it: the function, where it came from, and what was seen of it."""

    record: EngineOp
    fn: Callable[..., Any]
    spec: Any = None  # OpSpec, when verifying
    reference: Callable[..., Any] | None = None
    kernels: tuple[str, ...] = ()  # names of its Triton kernels, as a profiler reports them
    annotate: bool = False  # a profiler range per call (patterns.serving.profile, eager steps only)
    active: bool = False  # inside a call that has not returned (names the op that broke a graph capture)

    def __call__(self, **inputs: Any) -> Any:
        self.record.calls += 1
        self.active = True
        if self.annotate:
            with torch.profiler.record_function(self.record.op):
                ret = self.fn(**inputs) if self.reference is None else self._verified(inputs)
        else:
            ret = self.fn(**inputs) if self.reference is None else self._verified(inputs)
        self.active = False
        return ret

    def _verified(self, inputs: dict[str, Any]) -> Any:
        from patterns.core.compare import collect, errors, first_mismatch, reference_result, tolerances

        want = reference_result(self.spec, self.reference, inputs)  # on clones, before in-place inputs change
        ret = self.fn(**inputs)
        got = collect(self.spec, ret, inputs)
        dtype = str(next(v for v in inputs.values() if isinstance(v, torch.Tensor) and v.is_floating_point()).dtype).removeprefix("torch.")
        tol = tolerances(self.spec, want, dtype)  # each output to its own contract, as the gate holds it
        r = self.record
        r.max_abs_err = max(r.max_abs_err or 0.0, errors(got, want)[0])
        bad = first_mismatch(got, want, tol)
        if bad and not r.mismatch:
            r.mismatch = f"call {r.calls}: {bad.describe()}"
        r.within_tolerance = (r.within_tolerance is not False) and bad is None
        return ret


def resolve(impl: Impl, device: str) -> tuple[Literal["reference", "live"], str]:
    """(impl, device) after `auto`; switches on Triton's interpreter for live ops on a CPU."""
    from patterns.core import interpreter
    from patterns.core.ops import OpError, resolve_device

    if impl not in ("auto", "reference", "live"):
        raise EngineError(f"unknown impl '{impl}' (auto, reference or live)")
    try:
        device = resolve_device(device)
    except OpError as e:
        raise EngineError(str(e)) from None
    chosen = impl if impl != "auto" else ("live" if device.startswith("cuda") else "reference")
    if chosen == "live" and device == "cpu":
        # kernels (and triton.language's own helpers) are decorated at import: the
        # interpreter must be on before Triton loads
        if "triton" in sys.modules and os.environ.get("TRITON_INTERPRET") != "1":
            raise EngineError("live ops on the CPU run through Triton's interpreter: set TRITON_INTERPRET=1 before Triton is imported")
        os.environ["TRITON_INTERPRET"] = "1"
        interpreter.install_cpu_shims()
    return chosen, device


def resolve_mode(mode: Mode, impl: str, device: str, verify: bool) -> Literal["eager", "graph"]:
    if mode not in ("auto", "eager", "graph"):
        raise EngineError(f"unknown mode '{mode}' (auto, eager or graph)")
    if verify and mode == "graph":
        raise EngineError("--verify shadows every call with the reference and compares on the host, which a CUDA graph cannot replay: use --mode eager")
    if mode == "auto":
        return "graph" if device.startswith("cuda") and impl == "live" and not verify else "eager"
    return mode


def bind_ops(impl: Literal["reference", "live"], registry=None, verify: bool = False, versions: Mapping[str, int] | None = None) -> dict[str, BoundOp]:
    """The one place that decides which implementation of each op the engine calls.

    `versions` pins ops to registered versions (`{"matmul": 1}`); the others run live.
    """
    from patterns.core.ops import load_reference, load_spec
    from patterns.serving.profile import triton_kernels
    from patterns.serving.registry import Registry, RegistryError, load_impl

    unknown = sorted(set(versions or {}) - set(OPS))
    if unknown:
        raise RegistryError(f"the engine runs no op '{unknown[0]}' ({', '.join(OPS)})")
    bound = {}
    for op in OPS:
        spec = load_spec(op)
        reference = load_reference(spec)
        if impl == "reference":
            file = Path(reference.__code__.co_filename)
            bound[op] = BoundOp(EngineOp(op=op, impl="reference", file=str(file.relative_to(file.parents[2]))), reference)
            continue
        registry = registry or Registry()
        live = registry.version(op, versions[op]) if versions and op in versions else registry.live(op)
        fn = load_impl(live)
        record = EngineOp(op=op, impl="live", version=live.version, pattern=live.pattern, sha256=live.sha256, file=live.origin or live.file)
        bound[op] = BoundOp(record, fn, spec, reference, kernels=triton_kernels(fn)) if verify else BoundOp(record, fn, kernels=triton_kernels(fn))
    return bound


def sync(device: str) -> None:
    """Wait for the device (a no-op on the CPU)."""
    if device.startswith("cuda"):
        torch.cuda.synchronize(device)


def itl_percentiles(itl_s: list[float]) -> tuple[float, float]:
    """(p50, p99) of inter-token latencies, in ms."""
    if len(itl_s) == 1:
        return 1e3 * itl_s[0], 1e3 * itl_s[0]
    return 1e3 * statistics.median(itl_s), 1e3 * statistics.quantiles(itl_s, n=100, method="inclusive")[98]


class Engine:
    def __init__(self, cfg: ModelConfig, impl: Impl = "auto", device: str = "auto", registry=None, verify: bool = False,
                 mode: Mode = "auto", versions: Mapping[str, int] | None = None, model: HybridModel | None = None):
        self.impl, self.device = resolve(impl, device)
        if verify and self.impl == "reference":
            raise EngineError("--verify compares live ops with their references: it needs --impl live (or auto on a GPU)")
        self.mode = resolve_mode(mode, self.impl, self.device, verify)
        self.cfg = cfg
        self.model = model if model is not None else HybridModel(cfg, self.device)  # weights shared by engines of one process
        self.ops = bind_ops(self.impl, registry, verify, versions)
        self._decoders: dict[int, Decoder] = {}  # graph mode: one per batch-size bucket, with its cache

    def prompts(self, batch: int, length: int, seed: int = 0) -> torch.Tensor:
        """Seeded random prompts, `[batch, length]` token ids."""
        return torch.randint(0, self.cfg.vocab, (batch, length), generator=torch.Generator().manual_seed(seed)).to(self.device)

    def decoder(self, batch: int) -> Decoder:
        """The decoder a batch of `batch` sequences runs in: its bucket's (graph mode, kept), or a fresh one at its size."""
        if self.mode == "eager":
            return Decoder(self.model, self.model.new_cache(batch), self.ops, capture=False)
        size = bucket(batch)
        if size not in self._decoders:
            self._decoders[size] = Decoder(self.model, self.model.new_cache(size), self.ops, capture=self.device.startswith("cuda"))
        return self._decoders[size]

    def run(self, prompts: torch.Tensor, new_tokens: int) -> tuple[torch.Tensor, list[float], torch.Tensor]:
        """Greedy generation: (tokens `[B, new_tokens]`, seconds from the start to each token, last logits `[B, vocab]`)."""
        B = prompts.shape[0]
        dec = self.decoder(B)
        cache = dec.cache
        cache.reset()
        rows = dec.tokens.shape[0]
        padded = torch.cat([prompts, prompts[-1:].expand(rows - B, -1)]) if rows > B else prompts  # a bucket's spare rows
        sync(self.device)
        start = time.perf_counter()
        logits = self.model.prefill(padded, cache, self.ops)
        dec.tokens.copy_(logits.argmax(-1))
        out = [dec.tokens[:B].clone()]
        sync(self.device)
        stamps = [time.perf_counter() - start]
        cache.reserve(new_tokens - 1)
        dec.prepare()  # warm-up and capture on the bucket's first use: in the warm-up generation
        for _ in range(new_tokens - 1):
            dec.step()
            out.append(dec.tokens[:B].clone())
            sync(self.device)  # a server hands each token to its client: the step is over when the host has it
            stamps.append(time.perf_counter() - start)
            logits = dec.logits
        return torch.stack(out, dim=1), stamps, logits[:B]

    def generate(self, prompts: torch.Tensor, new_tokens: int, warmup: bool = True) -> EngineReport:
        """Generate `new_tokens` per sequence after a warm-up (first calls: Triton's compiler and autotuners, the graph's capture)."""
        if prompts.ndim != 2 or prompts.shape[0] < 1 or prompts.shape[1] < 1:
            raise EngineError(f"prompts must be [batch, length] with both at least 1 (got {list(prompts.shape)})")
        if new_tokens < 2:
            raise EngineError(f"new tokens must be at least 2 to have an inter-token latency (got {new_tokens})")
        if prompts.shape[1] + new_tokens > self.cfg.max_len:
            raise EngineError(f"prompt {prompts.shape[1]} + {new_tokens} new tokens exceed the model's max_len {self.cfg.max_len}")
        try:
            with torch.inference_mode():
                if warmup:
                    self.run(prompts, 2)
                    for op in self.ops.values():
                        op.record.calls = 0
                tokens, stamps, _ = self.run(prompts, new_tokens)
        except CaptureError as e:
            raise EngineError(f"{e}: run with --mode eager") from None
        itl = [b - a for a, b in zip(stamps, stamps[1:])]
        p50, p99 = itl_percentiles(itl)
        return EngineReport(
            device=self.device, impl=self.impl, mode=self.mode, bucket=bucket(prompts.shape[0]) if self.mode == "graph" else prompts.shape[0],
            model=self.cfg.as_dict(), batch=prompts.shape[0], prompt_len=prompts.shape[1], new_tokens=new_tokens, ttft_ms=1e3 * stamps[0],
            itl_ms_median=p50, itl_ms_p99=p99, tokens_per_s=prompts.shape[0] * (new_tokens - 1) / (stamps[-1] - stamps[0]),
            ops=[op.record for op in self.ops.values()], tokens=tokens.tolist(),
        )
