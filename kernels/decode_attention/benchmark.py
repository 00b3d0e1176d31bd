"""What the GPU benchmark times for decode_attention: split-KV, GQA head grouping, and split counts."""
from __future__ import annotations

from patterns.core.benchspec import Benchmark, Step, fmt_ratio, ratio_target, target
from patterns.core.stats import NOISE_FLOOR

STEPS = (
    Step("split-KV", (("split_kv_lse_merge", {}),),
         "B*HQ programs under-fill the SMs at small batch: split the KV range and merge by log-sum-exp"),
    Step("split-KV+grouped", (("split_kv_lse_merge", {}), ("gqa_head_grouping", {})),
         "the HQ/HK query heads of a group each reload the shared K/V: one program per KV head loads it once"),
)


def targets(res: dict) -> list[dict]:
    out = []
    for row in res["rows"]:
        B = row["shape"]["B"]
        r = row["ratios"][f"{row['final']} vs baseline"]
        page = f"page {row['shape']['PAGE']}" if row["shape"].get("PAGE") else "contiguous"
        if B <= 8:
            out.append(ratio_target(f"B={B} {page}: >= 2x the unsplit baseline", r, 2.0))
        if B >= 64:
            out.append(target(f"B={B} {page}: never slower than the baseline (noise floor {NOISE_FLOOR:.0%})",
                              r["median"] >= 1 - NOISE_FLOOR, fmt_ratio(r)))
    return out


BENCHMARK = Benchmark(
    title="Decode attention, split-KV and GQA head grouping",
    position=2,
    steps=STEPS,
    sweeps=tuple((f"split-KV x{n}", (("split_kv_lse_merge", {"num_splits": str(n)}),)) for n in (2, 4, 8, 16, 32)),
    targets=targets,
    shape_keys=("B", "PAGE"),
)
