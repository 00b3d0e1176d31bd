"""Statistics the stages share: the bootstrap interval of a median."""
from __future__ import annotations

import numpy as np


def bootstrap_ci(values, n: int = 2000, seed: int = 0) -> tuple[float, float]:
    """95% interval of the median of `values` (resampled `n` times with replacement)."""
    values = np.asarray(values, dtype=float)
    rng = np.random.default_rng(seed)
    meds = np.median(values[rng.integers(0, len(values), (n, len(values)))], axis=1)
    lo, hi = np.percentile(meds, [2.5, 97.5])
    return float(lo), float(hi)
