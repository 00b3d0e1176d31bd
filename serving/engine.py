"""The serving engine: batched greedy generation with the hybrid decoder, through the registry's live ops.

    engine = Engine(PRESETS["tiny"], impl="live", device="cpu")
    report = engine.generate(prompts, new_tokens=16)      # EngineReport

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
from typing import Any, Callable, Literal

import torch

from patterns.serving.model import OPS, HybridModel, ModelConfig
from patterns.core.records import EngineOp, EngineReport

Impl = Literal["auto", "reference", "live"]


class EngineError(ValueError):
    """Bad input to the engine: one line, CLI exit 2."""


@dataclass
class BoundOp:
    """One op as the engine calls it: the function, where it came from, and what was seen of it."""

    record: EngineOp
    fn: Callable[..., Any]
    spec: Any = None  # OpSpec, when verifying
    reference: Callable[..., Any] | None = None

    def __call__(self, **inputs: Any) -> Any:
        self.record.calls += 1
        if self.reference is None:
            return self.fn(**inputs)
        return self._verified(inputs)

    def _verified(self, inputs: dict[str, Any]) -> Any:
        from patterns.validation.runner import call_reference, collect, errors, first_mismatch

        want = call_reference(self.spec, self.reference, inputs)  # on clones, before in-place inputs change
        ret = self.fn(**inputs)
        got = collect(self.spec, ret, inputs)
        dtype = str(next(v for v in inputs.values() if isinstance(v, torch.Tensor) and v.is_floating_point()).dtype).removeprefix("torch.")
        tol = self.spec.tolerance[dtype]
        r = self.record
        r.max_abs_err = max(r.max_abs_err or 0.0, errors(got, want)[0])
        bad = first_mismatch(got, want, tol)
        if bad and not r.mismatch:
            r.mismatch = f"call {r.calls}: {bad.describe(tol)}"
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


def bind_ops(impl: Literal["reference", "live"], registry=None, verify: bool = False) -> dict[str, BoundOp]:
    """The one place that decides which implementation of each op the engine calls."""
    from patterns.core.ops import load_reference, load_spec
    from patterns.serving.registry import Registry, load_live

    bound = {}
    for op in OPS:
        spec = load_spec(op)
        reference = load_reference(spec)
        if impl == "reference":
            file = Path(reference.__code__.co_filename)
            bound[op] = BoundOp(EngineOp(op=op, impl="reference", file=str(file.relative_to(file.parents[2]))), reference)
            continue
        registry = registry or Registry()
        live = registry.live(op)
        fn = load_live(op, registry)
        if not fn.__module__.endswith(live.sha256[:16]):  # promoted between the two reads: take the newer
            live = registry.live(op)
        record = EngineOp(op=op, impl="live", version=live.version, pattern=live.pattern, sha256=live.sha256, file=live.origin or live.file)
        bound[op] = BoundOp(record, fn, spec, reference) if verify else BoundOp(record, fn)
    return bound


class Engine:
    def __init__(self, cfg: ModelConfig, impl: Impl = "auto", device: str = "auto", registry=None, verify: bool = False):
        self.impl, self.device = resolve(impl, device)
        if verify and self.impl == "reference":
            raise EngineError("--verify compares live ops with their references: it needs --impl live (or auto on a GPU)")
        self.cfg = cfg
        self.model = HybridModel(cfg, self.device)
        self.ops = bind_ops(self.impl, registry, verify)

    def prompts(self, batch: int, length: int, seed: int = 0) -> torch.Tensor:
        """Seeded random prompts, `[batch, length]` token ids."""
        return torch.randint(0, self.cfg.vocab, (batch, length), generator=torch.Generator().manual_seed(seed)).to(self.device)

    def _sync(self) -> None:
        if self.device.startswith("cuda"):
            torch.cuda.synchronize(self.device)

    def run(self, prompts: torch.Tensor, new_tokens: int) -> tuple[torch.Tensor, list[float], torch.Tensor]:
        """Greedy generation: (tokens `[B, new_tokens]`, seconds from the start to each token, last logits)."""
        cache = self.model.new_cache(prompts.shape[0])
        stamps, out = [], []
        self._sync()
        start = time.perf_counter()
        logits = None
        # the prompt goes through the same decode step, one token at a time: the
        # attention op takes one query per sequence
        for t in range(prompts.shape[1]):
            logits = self.model.step(prompts[:, t], cache, self.ops)
        for _ in range(new_tokens):
            token = logits.argmax(-1)
            out.append(token)
            self._sync()
            stamps.append(time.perf_counter() - start)
            if len(out) < new_tokens:
                logits = self.model.step(token, cache, self.ops)
        return torch.stack(out, dim=1), stamps, logits

    def generate(self, prompts: torch.Tensor, new_tokens: int, warmup: bool = True) -> EngineReport:
        """Generate `new_tokens` per sequence after a warm-up (first calls: Triton's compiler, allocators, lazy init)."""
        if prompts.ndim != 2 or prompts.shape[0] < 1 or prompts.shape[1] < 1:
            raise EngineError(f"prompts must be [batch, length] with both at least 1 (got {list(prompts.shape)})")
        if new_tokens < 2:
            raise EngineError(f"new tokens must be at least 2 to have an inter-token latency (got {new_tokens})")
        if prompts.shape[1] + new_tokens > self.cfg.max_len:
            raise EngineError(f"prompt {prompts.shape[1]} + {new_tokens} new tokens exceed the model's max_len {self.cfg.max_len}")
        with torch.inference_mode():
            if warmup:
                self.run(prompts[:, :1], 2)
                for op in self.ops.values():
                    op.record.calls = 0
            tokens, stamps, _ = self.run(prompts, new_tokens)
        itl = [b - a for a, b in zip(stamps, stamps[1:])]
        deciles = statistics.quantiles(itl, n=10) if len(itl) > 1 else itl * 9
        return EngineReport(
            device=self.device, impl=self.impl, model=self.cfg.as_dict(), batch=prompts.shape[0], prompt_len=prompts.shape[1],
            new_tokens=new_tokens, ttft_ms=1e3 * stamps[0], itl_ms_median=1e3 * statistics.median(itl), itl_ms_p90=1e3 * deciles[-1],
            tokens_per_s=prompts.shape[0] * new_tokens / stamps[-1], ops=[op.record for op in self.ops.values()], tokens=tokens.tolist(),
        )
