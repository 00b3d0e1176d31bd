"""Names every part of the facts package (and the stages reading facts) agree on."""
from __future__ import annotations

# Aliases upstream code uses for the Triton namespaces; normalised so that a
# predicate can ask for "tl.dot" whatever the file imported.
MODULE_ALIASES = {
    "triton.language": "tl",
    "triton.language.extra.libdevice": "libdevice",
    "triton.language.extra.cuda.libdevice": "libdevice",
    "triton": "triton",
}
# decorators (normalised through MODULE_ALIASES) that make a function a Triton function
JIT_DECORATORS = frozenset({"triton.jit", "jit", "triton.autotune", "autotune", "triton.heuristics", "heuristics"})
FLOAT_DTYPES = frozenset({"float32", "float16", "bfloat16", "float64", "float8e4nv", "float8e5", "float8e4b15", "fp32", "fp16", "bf16"})

# `tl.program_id(a) % n` (tiles folded into axis a as its fastest part, `pid // n` the rest) counts as
# axis a + FOLDED_AXIS: a load that reads only `pid // n` is shared by the programs of those tiles
FOLDED_AXIS = 3


class FactsError(ValueError):
    """A file cannot be analysed (not Python, syntax error). Message is one line."""
