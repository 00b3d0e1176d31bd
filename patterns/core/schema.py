"""The pattern schema: one folder of patterns/library, validated from pattern.yaml.

A pattern's conditions (`Condition`) are trees over the predicates of
patterns.core.predicates; `Verdict` is what evaluating one gives. These types,
with the predicates and the loader, name the validated-library snapshot
(patterns.core.library), so editing a record elsewhere keeps that snapshot.
"""
from __future__ import annotations

from enum import Enum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator


class Category(str, Enum):
    memory = "memory"
    compute = "compute"
    parallelism = "parallelism"
    numerics = "numerics"
    launch_scheduling = "launch-scheduling"
    fusion = "fusion"
    quantization = "quantization"
    concurrency_host = "concurrency-host"


class Status(str, Enum):
    draft = "draft"
    preview = "preview"
    stable = "stable"


class BottleneckClass(str, Enum):
    memory = "memory-bound"
    compute = "compute-bound"
    occupancy = "occupancy-bound"
    launch = "launch-bound"
    host = "host-bound"
    numerics = "numerics-risk"


class Safety(str, Enum):
    """What review a rewrite needs. Only `exact` may ever merge without a person."""

    exact = "exact"
    numerics = "numerics-changing"
    concurrency = "concurrency-changing"

    @property
    def review(self) -> str:
        return {
            "exact": "bit-identical: may merge automatically with --auto-merge-exact",
            "numerics-changing": "changes rounding or reduction order: a person must accept",
            "concurrency-changing": "changes threading or ordering: a person must accept",
        }[self.value]


class StrictModel(BaseModel):
    """Base of the schema and the records: unknown fields are errors."""

    model_config = ConfigDict(extra="forbid", use_enum_values=False, defer_build=True)


class Condition(StrictModel):
    """A machine-checkable condition: a tree of all/any/not over named predicates.

    YAML forms:  `{all: [...]}`, `{any: [...]}`, `{not: {...}}`,
    `{predicate_name: {arg: value}}` or a bare `predicate_name`.
    Predicates come from the one library in patterns.core.predicates; names and
    arguments are checked when the pattern loads (no eval of strings).
    """

    op: Literal["all", "any", "not", "pred"]
    children: list[Condition] = Field(default_factory=list)
    predicate: str = ""
    args: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _from_yaml(cls, data: Any) -> Any:
        if isinstance(data, str):
            return {"op": "pred", "predicate": data, "args": {}}
        if isinstance(data, dict) and "op" not in data:
            if len(data) != 1:
                raise ValueError(f"a condition has exactly one key (all/any/not/<predicate>), got {sorted(data)}")
            (key, value), = data.items()
            if key in ("all", "any"):
                if not isinstance(value, list) or not value:
                    raise ValueError(f"'{key}' takes a non-empty list of conditions")
                return {"op": key, "children": value}
            if key == "not":
                return {"op": "not", "children": [value]}
            if value is None:
                value = {}
            if not isinstance(value, dict):
                raise ValueError(f"predicate '{key}' takes a mapping of arguments, got {type(value).__name__}")
            return {"op": "pred", "predicate": key, "args": value}
        return data

    @model_validator(mode="after")
    def _check_predicate(self) -> Condition:
        if self.op == "pred":
            from patterns.core.predicates import validate_call  # registry imports this module

            self.args = validate_call(self.predicate, self.args)
        return self

    def to_yaml(self) -> Any:
        if self.op == "pred":
            return {self.predicate: self.args} if self.args else self.predicate
        if self.op == "not":
            return {"not": self.children[0].to_yaml()}
        return {self.op: [c.to_yaml() for c in self.children]}

    def describe(self) -> str:
        if self.op == "pred":
            inner = ", ".join(f"{k}={v}" for k, v in self.args.items())
            return f"{self.predicate}({inner})"
        if self.op == "not":
            return f"not {self.children[0].describe()}"
        joiner = " and " if self.op == "all" else " or "
        return joiner.join(f"({c.describe()})" if c.op in ("all", "any") else c.describe() for c in self.children)


class ArchCondition(StrictModel):
    vendors: list[Literal["nvidia", "amd"]] = Field(default_factory=lambda: ["nvidia", "amd"])
    min_sm: int | None = Field(None, description="minimum NVIDIA compute capability x10, e.g. 90 for Hopper")
    max_sm: int | None = None


class ShapeCondition(StrictModel):
    name: str = Field(description="shape variable as given to --shape, e.g. B or N_CTX")
    min: int | None = None
    max: int | None = None


class AppliesWhen(StrictModel):
    bottlenecks: list[BottleneckClass] = Field(min_length=1)
    conditions: Condition | None = None
    arch: ArchCondition = Field(default_factory=ArchCondition)
    dtypes: list[str] = Field(default_factory=list, description="operand dtypes it is for; empty = any")
    shapes: list[ShapeCondition] = Field(default_factory=list)
    triton: str | None = Field(None, description="Triton versions it works on, a PEP 440 specifier (e.g. '<3.9'); gated on --triton or the installed Triton")


class ResourceLimits(StrictModel):
    registers: str = ""
    shared_memory: str = ""
    sm_count: str = ""
    occupancy: str = ""
    notes: str = ""

    @model_validator(mode="after")
    def _some(self) -> ResourceLimits:
        if not any((self.registers, self.shared_memory, self.sm_count, self.occupancy, self.notes)):
            raise ValueError("state at least one bound (registers, shared_memory, sm_count, occupancy or notes)")
        return self


class RewriteParam(StrictModel):
    type: Literal["int", "str", "bool", "float"]
    default: Any = None
    choices: list[Any] = Field(default_factory=list)
    help: str = ""
    by_sm: dict[int, Any] = Field(
        default_factory=dict,
        description="default on NVIDIA GPUs from this compute capability (x10) on, e.g. {90: hopper}; the highest that applies wins",
    )

    @model_validator(mode="after")
    def _by_sm_is_a_choice(self) -> RewriteParam:
        bad = [v for v in self.by_sm.values() if self.choices and v not in self.choices]
        if bad:
            raise ValueError(f"by_sm value {bad[0]!r} is not one of the choices {self.choices}")
        return self

    def default_for(self, sm: int = 0) -> Any:
        """The default on a GPU of compute capability `sm` (x10; 0: unknown or not NVIDIA)."""
        picks = [v for at, v in sorted(self.by_sm.items()) if sm >= at]
        return picks[-1] if picks else self.default


class Transformation(StrictModel):
    method: str = Field(min_length=40, description="the method in prose")
    rewrite: str | None = Field(None, description="name of the automatic rewrite in patterns.rewriter, if any")
    params: dict[str, RewriteParam] = Field(default_factory=dict)


class UpstreamLocation(StrictModel):
    project: Literal["sglang", "fla", "deepgemm", "deepep"]
    version: str
    path: str = Field(description="path inside the upstream wheel, e.g. fla/ops/kda/fused_recurrent.py")
    symbol: str
    lines: tuple[int, int]
    note: str = ""
    sha256: str = Field("", description="sha256 of the upstream file when the location was recorded (set by the distiller)")

    @field_validator("lines")
    @classmethod
    def _ordered(cls, v: tuple[int, int]) -> tuple[int, int]:
        if v[0] < 1 or v[1] < v[0]:
            raise ValueError(f"lines must be [start, end] with 1 <= start <= end, got {list(v)}")
        return v

    @property
    def ref(self) -> str:
        return f"{self.project} {self.version} {self.path}:{self.lines[0]}-{self.lines[1]} ({self.symbol})"


class Measurement(StrictModel):
    hardware: str
    shapes: str
    baseline: str
    candidate: str
    ratio: float = Field(gt=0, description="candidate speed over baseline (>1 is faster), or error ratio where stated")
    metric: str = "speedup"
    command: str
    source: str = Field("", description="evidence bundle or benchmark file this came from")


class PatternEvidence(StrictModel):
    upstream: list[UpstreamLocation] = Field(default_factory=list)
    measured: list[Measurement] = Field(default_factory=list)


class Trap(StrictModel):
    fact: str
    why: str
    how: str


class Reference(StrictModel):
    title: str
    url: str = ""


class Example(StrictModel):
    """How the before/after examples are run and checked against reference.py."""

    entry: str = Field(description="launcher function defined in before.py and after.py")
    shapes: list[dict[str, int]] = Field(min_length=1)
    seeds: list[int] = Field(default_factory=lambda: [0, 1, 2])
    atol: float = 1e-5
    rtol: float = 1e-5
    kernel: str = Field("", description="kernel the pattern is about, when the file has several")
    inplace: list[str] = Field(default_factory=list, description="inputs the launcher updates in place")
    gpu_only: str = Field("", description="why the interpreter cannot run it; empty = runs on CPU")


class Pattern(StrictModel):
    id: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    title: str = Field(min_length=8)
    category: Category
    status: Status
    summary: str = Field(min_length=20)
    why: str = Field(min_length=80, description="mechanism with the traffic/FLOP arithmetic")
    present_when: Condition
    applies_when: AppliesWhen
    resource_limits: ResourceLimits
    transformation: Transformation
    safety: Safety
    # the validation gate's speed rule for a rewrite of this pattern: a fix that buys
    # accuracy (tf32x3) may cost time, which a speed-only rule would always refuse
    max_cost: float = Field(1.0, ge=1.0, le=10.0, description="a rewrite may take up to this factor of the baseline's time; 1: it must not be slower")
    evidence: PatternEvidence
    traps: list[Trap] = Field(default_factory=list)
    references: list[Reference] = Field(default_factory=list)
    example: Example | None = None
    tags: list[str] = Field(default_factory=list)

    @property
    def projects(self) -> list[str]:
        return sorted({u.project for u in self.evidence.upstream})

    def search_text(self) -> str:
        """Text embedded for semantic search and shown by keyword search."""
        parts = [self.title, self.summary, self.why, self.transformation.method, " ".join(self.tags)]
        parts += [b.value for b in self.applies_when.bottlenecks]
        parts += [f"{t.fact} {t.why}" for t in self.traps]
        return "\n".join(parts)


class Verdict(StrictModel):
    """Result of evaluating a condition: whether it holds, where, and why."""

    ok: bool
    lines: list[int] = Field(default_factory=list)
    reasons: list[str] = Field(default_factory=list)

