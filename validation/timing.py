"""GPU timing: CUDA graphs of launches after L2 flushes, replayed interleaved.

Used where the implementations run: in the gate's child process for a
candidate (validation/child.py), in-process for trusted code (the GPU
benchmark, the in-process arm of evidence/gpu/h200-gate). Nothing here decides
anything; perf.py turns the times into ratios and verdicts.

Each function is captured in a CUDA graph of `inner` launches, each launch
after an L2 flush (zeroing a buffer twice the L2 size); a graph of the flushes
alone is subtracted. For ops that update inputs in place, each launch first
restores those inputs from a pristine copy (in both graphs, so the copy
cancels), so every launch computes the same thing from the same state and what
the graph's last launch returned can be checked against the reference: the
timed runs are checked, not only the untimed ones.
"""
from __future__ import annotations

import math
from typing import Any, Callable

import torch

Restore = Callable[[], None]


def flush_buffer(device: str) -> torch.Tensor:
    l2 = torch.cuda.get_device_properties(device).L2_cache_size
    return torch.empty(max(2 * l2, 1 << 20) // 4, dtype=torch.int32, device=device)


def capture(fn: Callable[[], Any], flush: torch.Tensor, inner: int, restore: Restore | None = None) -> tuple[torch.cuda.CUDAGraph, Any]:
    """A graph of `inner` (restore, flush, fn) steps, and what fn returned in the last of them
    (graph memory: a replay rewrites it)."""
    # warm up on a side stream first: Triton compiles there, not during capture
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            if restore:
                restore()
            fn()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    ret = None
    with torch.cuda.graph(graph):
        for _ in range(inner):
            if restore:
                restore()
            flush.zero_()
            ret = fn()
    torch.cuda.synchronize()
    return graph, ret


def replay_ms(graph: torch.cuda.CUDAGraph) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    graph.replay()
    end.record()
    end.synchronize()
    return start.elapsed_time(end)


def inner_count(fn: Callable[[], Any], flush: torch.Tensor) -> int:
    """Launches per graph so that one replay takes about 2 ms."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(5):
        flush.zero_()
        fn()
    end.record()
    end.synchronize()
    per = max(start.elapsed_time(end) / 5, 1e-3)
    return int(min(200, max(5, math.ceil(2.0 / per))))


def time_interleaved(
    fns: dict[str, Callable[[], Any]],
    device: str,
    rounds: int,
    inner: int | None = None,
    *,
    restores: dict[str, Restore] | None = None,
    on_round: Callable[[int, dict[str, Any]], None] | None = None,
) -> tuple[dict[str, list[float]], dict[str, int]]:
    """GPU time per launch (ms) of each function, one value per round, all measured side by side.

    Round r replays the graphs in an order rotated by r (and reversed every other
    cycle), so no function always runs first or after the same neighbour.
    `on_round(r, outputs)` is called after each round with what each graph's last
    launch returned (for the sampled checks of timed outputs).
    """
    restores = restores or {}
    flush = flush_buffer(device)
    inners = {name: inner or inner_count(fn, flush) for name, fn in fns.items()}
    captured = {name: capture(fn, flush, inners[name], restores.get(name)) for name, fn in fns.items()}
    flushes = {(inners[name], name): capture(lambda: None, flush, inners[name], restores.get(name))[0] for name in fns}
    names = list(fns)
    times: dict[str, list[float]] = {name: [] for name in names}
    for r in range(max(rounds, 1)):
        order = names[r % len(names):] + names[:r % len(names)]
        for name in order if (r // len(names)) % 2 == 0 else order[::-1]:
            t = replay_ms(captured[name][0])
            # sample the outputs before the flush-only graph runs: it restores in-place
            # inputs too, and a state read after it is the pristine one, not the result
            if on_round is not None:
                on_round(r, {name: captured[name][1]})
            f = replay_ms(flushes[(inners[name], name)])
            times[name].append(max(t - f, 1e-6) / inners[name])
    del captured, flushes
    return times, inners
