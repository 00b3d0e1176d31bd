"""Issue #20 on one H200: the precision bound (float64 reference, the op's declared accumulation) on
the GPU, where casts round to nearest and tl.dot on fp32 operands is TF32: every op's baseline and the
library's rewrites of it (evidence/gpu/h200-<op>/candidate-*.py) through the whole gate, timed on the
op's first GPU shape only. Per correctness check: the worst error as a fraction of the bound (candidate
and baseline) and any failing check. Writes precision.json beside the printed table; exit 1 if any
honest candidate failed (the false-rejection rate must stay 0).

    python3 evidence/gpu/h200-gate/precision.py [OP ...] > $OUT/precision.log   (OUT: where precision.json goes)
"""
import dataclasses
import json
import os
import sys
from pathlib import Path

from patterns.core.ops import available_ops, load_spec
from patterns.validation.gate import validate

ROOT = Path(__file__).resolve().parents[3]
rows, failed = [], 0
for op in sys.argv[1:] or available_ops():
    spec = load_spec(op)
    small = dataclasses.replace(spec, gpu_shapes=spec.gpu_shapes[:1])
    for cand in [None, *sorted((ROOT / "evidence" / "gpu").glob(f"h200-{op}*/candidate*.py"))]:
        bundle = validate(small, cand, device="cuda")
        name = "baseline" if cand is None else str(cand.relative_to(ROOT))
        bad = [c.reason for c in bundle.checks if c.passed is False and c.layer != "performance"]
        failed += bool(bad)
        for c in bundle.checks:
            if c.name == "correctness":
                p = c.details.get("precision", {})
                rows.append({"op": op, "candidate": name, "shape": c.shape, "passed": c.passed, **p})
                print(f"{op:16} {name[-48:]:48} {c.shape.get('dtype')}: {p.get('worst_error_vs_bound', float('nan')):.3f} "
                      f"(baseline {p.get('baseline_worst_error_vs_bound', float('nan')):.3f}) of {p.get('accumulation')}, {p.get('terms')} terms",
                      flush=True)
        for r in bad:
            print(f"   FAIL {r[:400]}", flush=True)
Path(os.environ.get("OUT", "."), "precision.json").write_text(json.dumps(rows, indent=1) + "\n")
print(f"{failed} honest candidate(s) with a failing correctness/partition/integrity check")
sys.exit(1 if failed else 0)
