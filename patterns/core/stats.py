"""Statistics of repeated measurements, shared by the gate, the GPU benchmark and the overlap rule."""
from __future__ import annotations

import numpy as np


def bootstrap_ci(values: np.ndarray, n: int = 2000, seed: int = 0) -> tuple[float, float]:
    """95% bootstrap interval of the median of `values` (seeded: the same values give the same interval)."""
    rng = np.random.default_rng(seed)
    meds = np.median(values[rng.integers(0, len(values), (n, len(values)))], axis=1)
    lo, hi = np.percentile(meds, [2.5, 97.5])
    return float(lo), float(hi)
