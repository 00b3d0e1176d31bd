"""The ops the adversarial cheats run on, each reduced to one CPU shape and one dtype (three seeds).

rowdot (tests/validation_op: out = x @ w + b), kda_decode (recurrent state updated
in place, a non-default `scale`) and rmsnorm_gate (y = rmsnorm(x) * silu(gate));
rowdot_fp16 is rowdot at float16 on rows of K=259, where a sum accumulated in
float16 stays inside the float16 tolerance (and the shapes drawn beside it, K up
to 388, rarely leave it: under 2% of draws at the largest).
"""
import dataclasses
from pathlib import Path

from patterns.core.ops import load_spec

HERE = Path(__file__).parent
ROWDOT = load_spec(str(HERE.parents[1] / "validation_op" / "spec_small.py"))
_kda = load_spec("kda_decode")
KDA = dataclasses.replace(_kda, shapes=(_kda.shapes[1],), dtypes=("float32",))
_rms = load_spec("rmsnorm_gate")
RMSNORM = dataclasses.replace(_rms, shapes=(_rms.shapes[0],), dtypes=("float32",), partition=None)
_rowdot = load_spec(str(HERE.parents[1] / "validation_op" / "spec.py"))
ROWDOT_FP16 = dataclasses.replace(_rowdot, shapes=({"M": 8, "K": 259},), dtypes=("float16",), partition=None)
SPECS = {"rowdot": ROWDOT, "kda_decode": KDA, "rmsnorm_gate": RMSNORM, "rowdot_fp16": ROWDOT_FP16}
