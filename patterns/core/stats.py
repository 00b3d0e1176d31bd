"""Statistics of repeated measurements, shared by the gate, the GPU benchmark and the overlap rule."""
from __future__ import annotations

import numpy as np

# Two imports of the same baseline measured ratios of 0.982-1.027 on an H200
# (evidence/gpu/h200-baselines): a self-comparison differs by up to ~2% through
# placement alone, so a speed rule does not blame a candidate for less.
NOISE_FLOOR = 0.02


def bootstrap_ci(values: np.ndarray, n: int = 2000, seed: int = 0) -> tuple[float, float]:
    """95% bootstrap interval of the median of `values` (seeded: the same values give the same interval)."""
    rng = np.random.default_rng(seed)
    meds = np.median(values[rng.integers(0, len(values), (n, len(values)))], axis=1)
    lo, hi = np.percentile(meds, [2.5, 97.5])
    return float(lo), float(hi)
