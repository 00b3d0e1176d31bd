"""The decode step of one cache and one binding of ops, replayed from a CUDA graph.

    dec = Decoder(model, cache, ops, capture=True)   # capture=False: the eager path
    dec.tokens.copy_(first_tokens)                   # static input, and the step's output
    cache.reserve(n)                                 # pages on the host, before the steps
    for _ in range(n):
        dec.step()                                   # next tokens in dec.tokens

Everything a step reads or writes is a tensor allocated before the capture and
kept for the decoder's life: the token buffer (the step's input, overwritten
with the argmax it samples), and the cache's KDA states, paged KV pools, page
table and lengths (`HybridModel.step` finds the new token's slot on the
device). A replay is then one launch from the host for the whole step, so the
host no longer sets the pace of a decode step of a few hundred small kernels.

The capture follows what a CUDA graph needs from the code inside it:

- warm-up first: two eager steps compile every Triton kernel for these shapes
  and run every autotuner's search (an autotuner benchmarks, and syncs, on the
  first call with a new key; inside a capture that would fail). The warm-up
  runs on the live cache, so the cache is snapshotted before and restored
  after (the steps change the KDA states and the lengths in place);
- no host syncs inside the step (no `.item()`, no host value read back), which
  is why the references of kernels/ (their attention loops over
  `int(seq_lens[b])`) cannot be captured: `Decoder.prepare` names the op
  that broke the capture;
- tensors the ops allocate inside the capture (outputs, split-KV partials)
  come from the graph's private memory pool, fixed at capture time and
  reused by every replay: nothing is allocated when a step runs.

A graph is tied to its batch size, so a server keeps one per batch-size
bucket (`bucket`): a batch runs in the graph of the smallest bucket that holds
it, the spare rows padding. On a CPU there is no capture: `capture=False`, and
the same static-buffer step runs eagerly.
"""
from __future__ import annotations

from typing import Any, Mapping

import torch

from patterns.serving.model import HybridModel, KVCache

WARMUP_STEPS = 2


class CaptureError(RuntimeError):
    """A decode step that could not be captured in a CUDA graph (an op synced with the host, say)."""


def bucket(batch: int) -> int:
    """The batch size of the graph a batch of `batch` sequences runs in: the next power of two."""
    return 1 << max(0, batch - 1).bit_length()


class Decoder:
    def __init__(self, model: HybridModel, cache: KVCache, ops: Mapping[str, Any], capture: bool):
        self.model, self.cache, self.ops = model, cache, ops
        self.capture = capture
        self.tokens = torch.zeros(cache.batch, dtype=torch.long, device=cache.seq_lens.device)
        self.logits: torch.Tensor | None = None
        self.graph: torch.cuda.CUDAGraph | None = None
        self._calls_per_step: dict[str, int] = {}

    def _step(self) -> torch.Tensor:
        logits = self.model.step(self.tokens, self.cache, self.ops)
        self.tokens.copy_(logits.argmax(-1))
        return logits

    def prepare(self) -> None:
        """Warm up and capture (once), leaving the cache and the tokens as they were; a no-op without capture."""
        if not self.capture or self.graph is not None:
            return
        snap, tokens = self.cache.snapshot(), self.tokens.clone()
        calls = self._calls()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(WARMUP_STEPS):
                self._step()
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        self.cache.restore(snap)
        self.tokens.copy_(tokens)
        self._set_calls(calls)
        graph = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(graph):
                self.logits = self._step()
        except Exception as exc:  # noqa: BLE001 - named in one line: which op, and what it did
            raise CaptureError(f"the decode step cannot be captured in a CUDA graph ({self._culprit()}): {type(exc).__name__}: {str(exc).splitlines()[0]}") from None
        # capturing records the step without running it: the cache is untouched, the calls were made once
        self._calls_per_step = {name: n - calls[name] for name, n in self._calls().items()}
        self._set_calls(calls)
        self.graph = graph

    def step(self, eager: bool = False) -> None:
        """One token per sequence, from the tokens in `self.tokens` to the next ones (in place); `eager` even with a graph."""
        if self.graph is not None and not eager:
            self.graph.replay()
            for name, n in self._calls_per_step.items():
                self.ops[name].record.calls += n
        else:
            logits = self._step()
            if self.graph is None:  # else `logits` stays the graph's output, which its replays write
                self.logits = logits
        self.cache.advance(1)

    def _calls(self) -> dict[str, int]:
        return {name: op.record.calls for name, op in self.ops.items() if hasattr(op, "record")}

    def _set_calls(self, calls: dict[str, int]) -> None:
        for name, n in calls.items():
            self.ops[name].record.calls = n

    def _culprit(self) -> str:
        """The op whose call was under way when the capture broke (BoundOp.active), else the glue."""
        active = [name for name, op in self.ops.items() if getattr(op, "active", False)]
        for name in active:
            self.ops[name].active = False
        return f"in op {active[-1]}" if active else "in the PyTorch glue"
