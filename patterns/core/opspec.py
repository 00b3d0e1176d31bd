"""What an op of kernels/ declares so the validation gate can check it.

Each `kernels/<op>/spec.py` defines `SPEC = OpSpec(...)`. The gate (this
package) reads nothing else about the op: shapes, dtypes, tolerances, inputs,
which inputs are updated in place, the partition axis and the traffic/FLOP
model all come from here, so one place decides each of them.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

Shape = dict[str, int]
Inputs = dict[str, Any]


@dataclass(frozen=True)
class Tolerance:
    atol: float
    rtol: float


@dataclass(frozen=True)
class Partition:
    """A partitioned path compared with the unpartitioned one.

    `run(inputs, n)` computes the op split into `n` partitions (chunks merged,
    KV splits, V tiles, K splits) with the implementation under test;
    `counts` are the partition counts the error curve is reported over.
    """

    axis: str
    counts: tuple[int, ...]
    run: Callable[[Callable, Inputs, int], Any]
    tolerance: dict[str, Tolerance]
    shape: Shape = field(default_factory=dict)
    # the single-pass result `run(...)` is compared with, from the same inputs;
    # None: the op's reference called on them
    unpartitioned: Callable[[Inputs], Any] | None = None


@dataclass(frozen=True)
class Acceptance:
    min_speedup: float = 1.0
    max_slowdown_any_shape: float = 0.05

    def allowing_cost(self, max_cost: float) -> "Acceptance":
        """This rule, relaxed for a rewrite whose pattern may cost up to `max_cost` times the baseline's time."""
        if max_cost <= 1.0:
            return self
        return Acceptance(min(self.min_speedup, 1 / max_cost), max(self.max_slowdown_any_shape, 1 - 1 / max_cost))


@dataclass(frozen=True)
class OpSpec:
    name: str
    # launcher of the baseline Triton kernel, "module:function" under patterns.kernels.<op>
    baseline: str
    reference: str
    make_inputs: Callable[[Shape, str, int, str], Inputs]  # (shape, dtype, seed, device) -> inputs
    shapes: tuple[Shape, ...]  # CPU correctness grid, odd sizes
    dtypes: tuple[str, ...]
    tolerance: dict[str, Tolerance]  # per dtype
    gpu_shapes: tuple[Shape, ...] = ()  # performance grid on the GPU
    # dtypes on the GPU (correctness and performance); empty: `dtypes`. Lets an
    # op test fp32 under the interpreter (bf16 tl.dot is not emulated) and time bf16
    gpu_dtypes: tuple[str, ...] = ()
    inplace: tuple[str, ...] = ()  # inputs the op updates in place (compared as outputs)
    # (the reference updates the same inputs of its own copy in place, so both sides
    # are compared after the call)
    outputs: tuple[str, ...] = ("out",)
    # inputs the launcher may overwrite as working memory (split partials): neither
    # compared nor reported as modified
    scratch: tuple[str, ...] = ()
    seeds: tuple[int, ...] = (0, 1, 2)
    partition: Partition | None = None
    # traffic and FLOP model for a shape and dtype: used for achieved bandwidth
    # and by the retriever's bottleneck estimate
    bytes_moved: Callable[[Shape, str], float] | None = None
    flops: Callable[[Shape, str], float] | None = None
    bound: str = "memory"  # memory | compute: which roofline ceiling is reported
    acceptance: Acceptance = field(default_factory=Acceptance)
    # inputs whose perturbation must change the output (integrity: skipped work)
    sensitive_inputs: tuple[str, ...] = ()
    # declared resource limits a candidate must respect (e.g. max num_warps, block sizes)
    resource_limits: dict[str, int] = field(default_factory=dict)
    # wall-clock limits of the gate (`patterns validate --timeout` overrides the first):
    # the whole validation, and any one import, call or timed shape of an implementation
    timeout_s: float = 900.0
    call_timeout_s: float = 180.0
    # the dtype the op's sums must accumulate in (a key of ACCUMULATION): with the output
    # dtype's rounding it sets how far from a float64 reference a result may be
    # (patterns.core.compare.precision_mismatch), so bf16 accumulation where fp32 is
    # required fails even inside the per-dtype tolerance
    accumulation: str = "float32"
    # the number of terms a sum of the op adds at a shape: a shape key ("K") or a
    # function of the shape; None: the shape's largest size (a longer sum only loosens the bound)
    reduction: str | Callable[[Shape], int] | None = None

    def reduction_length(self, shape: Shape) -> int:
        if callable(self.reduction):
            return max(1, int(self.reduction(shape)))
        if isinstance(self.reduction, str):
            return max(1, int(shape[self.reduction]))
        return max([1, *(int(v) for v in shape.values() if isinstance(v, int))])


# unit roundoff of each accumulation an op may declare: half the spacing of 1.0, the
# relative error of one rounded addition; "tf32": products of operands rounded to 10
# mantissa bits (tl.dot's default on fp32 operands on a GPU), summed in fp32, bounded
# as if every addition rounded at that precision
ACCUMULATION = {"float64": 2.0 ** -53, "float32": 2.0 ** -24, "tf32": 2.0 ** -11, "float16": 2.0 ** -11, "bfloat16": 2.0 ** -8}
