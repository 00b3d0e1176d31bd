"""Running Triton kernels on the CPU through Triton's interpreter.

`TRITON_INTERPRET=1` makes `@triton.jit` return interpreted functions, but two
things still ask for a GPU driver: the autotuner's benchmarker and
`triton.testing.do_bench`. The shims below time each call with a wall clock so
that autotuned kernels run (every config is exercised once). These timings are
never reported as performance: validation refuses interpreter timings.
"""
from __future__ import annotations

import os
import statistics
import time

_installed = False


def use_interpreter() -> bool:
    """Interpret kernels unless a CUDA/ROCm GPU is present or the user decided."""
    if "TRITON_INTERPRET" in os.environ:
        return os.environ["TRITON_INTERPRET"] == "1"
    try:
        import torch

        return not torch.cuda.is_available()
    except ImportError:
        return True


def enable() -> None:
    """Set TRITON_INTERPRET before any kernel module is imported, and install shims."""
    if use_interpreter():
        os.environ["TRITON_INTERPRET"] = "1"
        install_cpu_shims()


def _wall_bench(fn, warmup=0, rep=1, quantiles=None, return_mode="mean", **_):
    times = []
    for _ in range(max(1, min(int(rep) if isinstance(rep, int) else 1, 3))):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    if quantiles:
        return [statistics.median(times)] * len(quantiles)
    return statistics.fmean(times) if return_mode == "mean" else statistics.median(times)


def install_cpu_shims() -> None:
    global _installed
    if _installed:
        return
    import triton
    import triton.testing
    from triton.runtime import autotuner

    triton.testing.do_bench = _wall_bench
    # Autotuner.do_bench is a cached_property that asks the active driver.
    autotuner.Autotuner.do_bench = property(lambda self: self._do_bench or _wall_bench)
    _installed = True
