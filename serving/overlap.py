"""The acceptance rule of reference case 2: prefill plus KV-cache transfer within 5% of prefill alone.

    check_overlap(Path("serving/prefill.py"))            # CheckResult, layer "overlap"

The implementation file (serving/prefill.py or a rewritten copy of it) must
define `prefill(req, store, timeline)`. The scenario is this package's
(`PrefillConfig`, `make_request` and `KVStore` of patterns.serving), so a
candidate changes how the prefill runs, never what it is asked to do.

In one process, over several rounds, the same request is prefilled alone and
with its transfer, in alternating order (ABBA), after one warm-up of each. The
gap of a round is (prefill with transfer) / (prefill alone) - 1; the check
reports the median gap with a bootstrap 95% interval and passes when the
median is at most 5%. Every run with transfer must land every layer in the
store with exactly the pool's pages, and every run must produce the scenario's
hidden state and keys and values (the pool is NaN before each run, so a page
sent before its layer wrote it shows); a candidate that skips, corrupts or
hurries the transfer fails.

The thread timeline explains the number: `native overlap` is the fraction of
the transfer thread's completion waits during which the prefill thread was in
its device wait as well. Two native calls that hold the GIL cannot overlap, so
it stays near 0 for a PyDLL wait whatever the machine's load (a span also covers
the few bytecodes around its call, during which the GIL may change hands);
waits that release the GIL overlap almost entirely.
"""
from __future__ import annotations

import itertools
import os
import statistics
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

from patterns.core.ops import OpError, load_module, resolve_device
from patterns.core.records import CheckResult
from patterns.core.stats import bootstrap_ci
from patterns.serving.trace import Timeline, overlap_ns, write_trace

LIMIT = 0.05
# below this, the transfer's native waits (almost) never run while the prefill waits: the
# recorded spans include a few bytecodes around each call, during which the GIL may change hands
STARVED = 0.10
DEFAULT_ROUNDS = 15
ENTRY = "prefill"
_counter = itertools.count()


@dataclass
class Measurement:
    impl: Path
    device: str
    config: dict[str, Any]
    alone_s: list[float] = field(default_factory=list)
    with_transfer_s: list[float] = field(default_factory=list)
    native_overlap: list[float] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    timelines: dict[str, Any] = field(default_factory=dict)  # the last round's, for the trace

    @property
    def gaps(self) -> list[float]:
        return [w / a - 1 for a, w in zip(self.alone_s, self.with_transfer_s)]


def load_prefill(impl_path: Path) -> Callable[..., Any]:
    """The file's `prefill` entry point, imported afresh under its own module name."""
    impl_path = Path(impl_path)
    if not impl_path.is_file():
        raise OpError(f"{impl_path}: no such file")
    try:
        module = load_module(impl_path, f"_overlap_{impl_path.stem}_{next(_counter)}")
    except OpError:
        raise OpError(f"{impl_path}: cannot import (not a Python file)") from None
    except Exception as e:  # noqa: BLE001 - any import failure is bad input, named in one line
        raise OpError(f"{impl_path} failed to import: {type(e).__name__}: {e}") from None
    fn = getattr(module, ENTRY, None)
    if not callable(fn):
        raise OpError(f"{impl_path} has no '{ENTRY}(req, store, timeline)' entry point (see serving/prefill.py)")
    return fn


def native_overlap(timeline, transfer_thread: str) -> float:
    """Fraction of the transfer thread's native waits spent while the prefill (main) thread was in one too."""
    waits = timeline.intervals(transfer_thread, native=True)
    total = sum(e - s for s, e in waits)
    return overlap_ns(waits, timeline.intervals(threading.main_thread().name, native=True)) / total if total else 0.0


def measure(
    impl_path: Path, rounds: int = DEFAULT_ROUNDS, device: str = "auto", config=None, on_round: Callable[[int], None] | None = None,
) -> Measurement:
    """Time prefill alone and prefill with transfer of the same request, interleaved over `rounds` rounds."""
    import torch

    # the scenario's module builds its native library at import: inside the caller's error handling
    from patterns.serving.prefill import TRANSFER_THREAD, PrefillConfig, make_request, make_store, prefill_layer

    if rounds < 1:
        raise OpError(f"rounds must be at least 1 (got {rounds})")
    device = resolve_device(device)
    prefill = load_prefill(impl_path)
    cfg = config or PrefillConfig()
    req = make_request(cfg, device)
    store = make_store(req)
    m = Measurement(Path(impl_path), device, asdict(cfg))
    with torch.inference_mode():  # what every run must produce: the scenario's layers, one after the other
        want_h = req.hidden
        for i_l in range(cfg.layers):
            want_h = prefill_layer(req, i_l, want_h)
        want_pages = req.pool[:, req.page_ids].clone()

    def sync() -> None:
        if device.startswith("cuda"):
            torch.cuda.synchronize(device)

    def run(transfer: bool) -> tuple[float, Any]:
        # NaN everywhere a run must write: a page sent before its layer wrote it shows
        req.pool.fill_(float("nan"))
        store.reset()
        timeline = Timeline()
        sync()
        start = time.perf_counter()
        out = prefill(req, store if transfer else None, timeline)
        sync()
        elapsed = time.perf_counter() - start
        pages = req.pool[:, req.page_ids]
        if not (torch.allclose(out, want_h, rtol=1e-5, atol=1e-6) and torch.allclose(pages, want_pages, rtol=1e-5, atol=1e-6)):
            m.problems.append("the prefill's hidden state or keys and values differ from the scenario's layers")
        if transfer and store.missing():
            m.problems.append(f"layers {store.missing()[:5]} never landed in the store")
        elif transfer and not torch.equal(store.data, pages.to(store.data.device)):
            m.problems.append("the store's pages differ from the pool's")
        return elapsed, timeline

    # one intra-op thread: the layer's host work is small, and a second OpenMP thread
    # only fights the transfer thread (and the machine's other processes) for a core
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with torch.inference_mode():
            run(False), run(True)  # warm-up: allocator, thread start, first-call paths
            for r in range(rounds):
                order = (False, True) if r % 4 in (0, 3) else (True, False)  # ABBA: drift cancels
                runs = {transfer: run(transfer) for transfer in order}
                (t_alone, tl_alone), (t_with, tl_with) = runs[False], runs[True]
                m.alone_s.append(t_alone)
                m.with_transfer_s.append(t_with)
                m.native_overlap.append(native_overlap(tl_with, TRANSFER_THREAD))
                m.timelines = {"prefill alone": tl_alone, "prefill + transfer": tl_with}
                if on_round:
                    on_round(r)
    finally:
        torch.set_num_threads(threads)
    return m


def to_check(m: Measurement) -> CheckResult:
    import numpy as np

    gap = statistics.median(m.gaps)
    lo, hi = bootstrap_ci(np.array(m.gaps))
    overlap = statistics.median(m.native_overlap)
    details = {
        "impl": str(m.impl),
        "device": m.device,
        "rounds": len(m.gaps),
        "limit": LIMIT,
        "gap_median": gap,
        "gap_ci95": [lo, hi],
        "gaps": m.gaps,
        "alone_ms_median": 1e3 * statistics.median(m.alone_s),
        "with_transfer_ms_median": 1e3 * statistics.median(m.with_transfer_s),
        "native_overlap_median": overlap,
        "load_average_1min": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
    }
    result = dict(name="prefill + KV transfer within 5% of prefill alone", layer="overlap", shape=m.config, details=details)
    if m.problems:
        return CheckResult(**result, passed=False, reason=f"the transfer is wrong: {'; '.join(dict.fromkeys(m.problems))}")
    summary = (f"prefill + transfer {details['with_transfer_ms_median']:.1f} ms vs alone {details['alone_ms_median']:.1f} ms: "
               f"gap {100 * gap:+.1f}% (95% CI {100 * lo:+.1f}%..{100 * hi:+.1f}%); "
               f"transfer waits overlapping prefill waits {100 * overlap:.0f}%")
    if gap <= LIMIT:
        return CheckResult(**result, passed=True, reason=f"{summary}; within {100 * LIMIT:.0f}%")
    if overlap < STARVED:
        why = ("the two threads' native waits run one after the other: a native wait holds the GIL "
               "(a ctypes.PyDLL function, a binding without gil_scoped_release)")
    else:
        why = "the waits overlap, yet the transfer still lengthens the prefill: its Python work or the last layer's send is on the critical path"
    return CheckResult(**result, passed=False, reason=f"{summary}; over {100 * LIMIT:.0f}%: {why}")


def check_overlap(impl_path: Path, rounds: int = DEFAULT_ROUNDS, device: str = "auto", trace: Path | None = None) -> CheckResult:
    """The 5% rule on `impl_path`; with `trace`, the last round's two timelines are written as Chrome trace JSON."""
    m = measure(impl_path, rounds, device)
    if trace is not None:
        write_trace(trace, m.timelines)
    return to_check(m)
