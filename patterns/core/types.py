"""Core types shared by every stage: kernel facts, pattern, bottleneck,
suggestion, candidate, evidence. Defined once here; everything else imports them.
"""
from __future__ import annotations

from enum import Enum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

# --------------------------------------------------------------------------------------
# Kernel facts (produced by patterns.core.facts)
# --------------------------------------------------------------------------------------


class _Facts(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)


class Param(_Facts):
    name: str
    constexpr: bool = False
    annotation: str = ""
    default: str | None = None


class CallSite(_Facts):
    """One call inside a kernel or host function, normalised (`tl.dot`, `tl.load`)."""

    name: str
    line: int
    args: list[str] = Field(default_factory=list)
    kwargs: dict[str, str] = Field(default_factory=dict)
    loops: list[int] = Field(default_factory=list, description="lines of the enclosing loops, outermost first")
    function: str = ""
    receiver: str = Field("", description="origin of the object a method is called on, e.g. tl.make_tensor_descriptor")
    first_arg_origin: str = Field("", description="call that produced the first argument, e.g. tl.make_block_ptr")
    operand_dtypes: list[str] = Field(default_factory=list, description="tl.dot operand dtypes where readable")
    via: str = Field("", description="@triton.jit helper this call was inlined from")
    pid_axes: list[int] = Field(default_factory=list, description="program_id axes the arguments depend on (a + facts.FOLDED_AXIS: the fast part `program_id(a) % n` of a folded axis)")
    depends_on: list[str] = Field(default_factory=list, description="variables the arguments derive from, transitively")

    @property
    def in_loop(self) -> bool:
        return bool(self.loops)


class LoopFacts(_Facts):
    line: int
    end_line: int
    kind: str = Field(description="range, tl.range, tl.static_range, while, iter")
    target: str = ""
    iter: str = ""
    num_stages: int | None = None
    kwargs: dict[str, str] = Field(default_factory=dict)
    depth: int = 0
    assigned: list[str] = Field(default_factory=list, description="names (re)assigned in the loop body, loop targets included")
    args: list[str] = Field(default_factory=list, description="positional arguments of the range call")
    start_pid_axes: list[int] = Field(default_factory=list, description="program_id axes the range's start depends on")


class AutotuneFacts(_Facts):
    line: int
    configs: list[dict[str, str]] = Field(default_factory=list)
    key: list[str] = Field(default_factory=list)
    generated: bool = Field(False, description="configs built by an expression, count unknown")


class LaunchFacts(_Facts):
    """`kernel[grid](...)` in a host function."""

    kernel: str
    function: str
    line: int
    grid: str = ""
    grid_dims: int = 0
    grid_is_callable: bool = False
    args: list[str] = Field(default_factory=list)
    kwargs: dict[str, str] = Field(default_factory=dict)
    loops: list[int] = Field(default_factory=list)
    path: str = Field("", description="file of the launch when it is not the kernel's own file (set by the distiller)")


class KernelFacts(_Facts):
    name: str
    path: str
    line: int
    end_line: int
    docstring: str = ""
    decorators: list[str] = Field(default_factory=list)
    jit_kwargs: dict[str, str] = Field(default_factory=dict)
    params: list[Param] = Field(default_factory=list)
    autotune: AutotuneFacts | None = None
    heuristics: dict[str, str] = Field(default_factory=dict)
    calls: list[CallSite] = Field(default_factory=list)
    loops: list[LoopFacts] = Field(default_factory=list)
    dtypes: dict[str, str] = Field(default_factory=dict, description="local variable -> dtype where readable")
    origins: dict[str, str] = Field(default_factory=dict, description="local variable -> producing call")
    pid_deps: dict[str, list[int]] = Field(default_factory=dict, description="local variable -> program_id axes it depends on")
    assigns: dict[str, tuple[int, str]] = Field(default_factory=dict, description="local variable -> (line, last assigned expression)")
    accumulates: dict[str, list[str]] = Field(default_factory=dict, description="variable -> augmented assignments, 'add:<expr>'")
    launches: list[LaunchFacts] = Field(default_factory=list)
    helpers: list[str] = Field(default_factory=list)
    loaded: list[str] = Field(default_factory=list, description="local variables whose value derives from a load from memory (tl.load, desc.load)")

    def calls_named(self, *names: str) -> list[CallSite]:
        return [c for c in self.calls if c.name in names]

    @property
    def constexprs(self) -> list[str]:
        return [p.name for p in self.params if p.constexpr]

    def param(self, name: str) -> Param | None:
        return next((p for p in self.params if p.name == name), None)


class NativeConstruct(_Facts):
    """One recognised CUDA/C++ construct (a TMA copy, an mbarrier, a wgmma, ...) at a line."""

    kind: str = Field(description="construct kind, e.g. tma_copy, mbarrier, wgmma, reg_realloc (patterns.distill.native.KINDS)")
    name: str = Field(description="the call, type or PTX instruction that was recognised")
    line: int


class NativeFunctionFacts(_Facts):
    """A C++/CUDA function (free function, method or kernel) as read by the tree-sitter extractor."""

    name: str
    line: int
    end_line: int
    qualifiers: list[str] = Field(default_factory=list, description="__global__, __device__, CUTLASS_GLOBAL, __launch_bounds__, ...")
    template_params: list[str] = Field(default_factory=list)
    calls: list[str] = Field(default_factory=list, description="called names, template arguments stripped, deduplicated")
    constructs: list[NativeConstruct] = Field(default_factory=list)
    releases_gil: bool = False

    @property
    def is_kernel(self) -> bool:
        return any(q in ("__global__", "CUTLASS_GLOBAL") for q in self.qualifiers)


class PybindBinding(_Facts):
    """`m.def("name", &fn, ...)`: a C++ function exposed to Python."""

    name: str = Field(description="Python-visible name")
    target: str = Field("", description="bound C++ function, or '<lambda>'")
    line: int
    releases_gil: bool = Field(False, description="call_guard<gil_scoped_release> or a gil_scoped_release in the bound body")
    blocking: list[str] = Field(default_factory=list, description="calls in the bound body that wait (synchronize, wait, sleep, join, ...)")


class NativeFileFacts(_Facts):
    language: str = "cuda"
    functions: list[NativeFunctionFacts] = Field(default_factory=list)
    bindings: list[PybindBinding] = Field(default_factory=list)
    constructs: list[NativeConstruct] = Field(default_factory=list, description="constructs outside any function (specialisations, aliases)")
    includes: list[str] = Field(default_factory=list)
    parse_errors: int = Field(0, description="tree-sitter error nodes (macros it cannot expand)")

    def all_constructs(self) -> list[NativeConstruct]:
        return [c for f in self.functions for c in f.constructs] + self.constructs


class FileFacts(_Facts):
    path: str
    kernels: list[KernelFacts] = Field(default_factory=list)
    launches: list[LaunchFacts] = Field(default_factory=list)
    host_calls: list[CallSite] = Field(default_factory=list)
    host_functions: list[str] = Field(default_factory=list)
    imports: dict[str, str] = Field(default_factory=dict)
    constants: dict[str, str] = Field(default_factory=dict, description="module-level name -> assigned source text")
    docstring: str = ""
    host_assigns: dict[str, dict[str, tuple[int, str]]] = Field(
        default_factory=dict, description="host function -> local variable -> (line, last assigned expression)"
    )
    module_calls: list[CallSite] = Field(
        default_factory=list, description="calls at module or class level, outside functions (library handles made at import)"
    )
    lines: int = 0
    native: NativeFileFacts | None = Field(None, description="CUDA/C++ facts when the file is native code (distiller)")

    def kernel(self, name: str) -> KernelFacts | None:
        return next((k for k in self.kernels if k.name == name), None)


# --------------------------------------------------------------------------------------
# Pattern (one folder of patterns/library, validated from pattern.yaml)
# --------------------------------------------------------------------------------------


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


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", use_enum_values=False, defer_build=True)


class Condition(_Strict):
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


class ArchCondition(_Strict):
    vendors: list[Literal["nvidia", "amd"]] = Field(default_factory=lambda: ["nvidia", "amd"])
    min_sm: int | None = Field(None, description="minimum NVIDIA compute capability x10, e.g. 90 for Hopper")
    max_sm: int | None = None


class ShapeCondition(_Strict):
    name: str = Field(description="shape variable as given to --shape, e.g. B or N_CTX")
    min: int | None = None
    max: int | None = None


class AppliesWhen(_Strict):
    bottlenecks: list[BottleneckClass] = Field(min_length=1)
    conditions: Condition | None = None
    arch: ArchCondition = Field(default_factory=ArchCondition)
    dtypes: list[str] = Field(default_factory=list, description="operand dtypes it is for; empty = any")
    shapes: list[ShapeCondition] = Field(default_factory=list)


class ResourceLimits(_Strict):
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


class RewriteParam(_Strict):
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


class Transformation(_Strict):
    method: str = Field(min_length=40, description="the method in prose")
    rewrite: str | None = Field(None, description="name of the automatic rewrite in patterns.rewriter, if any")
    params: dict[str, RewriteParam] = Field(default_factory=dict)


class UpstreamLocation(_Strict):
    project: Literal["sglang", "fla", "deepgemm"]
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


class Measurement(_Strict):
    hardware: str
    shapes: str
    baseline: str
    candidate: str
    ratio: float = Field(gt=0, description="candidate speed over baseline (>1 is faster), or error ratio where stated")
    metric: str = "speedup"
    command: str
    source: str = Field("", description="evidence bundle or benchmark file this came from")


class PatternEvidence(_Strict):
    upstream: list[UpstreamLocation] = Field(default_factory=list)
    measured: list[Measurement] = Field(default_factory=list)


class Trap(_Strict):
    fact: str
    why: str
    how: str


class Reference(_Strict):
    title: str
    url: str = ""


class Example(_Strict):
    """How the before/after examples are run and checked against reference.py."""

    entry: str = Field(description="launcher function defined in before.py and after.py")
    shapes: list[dict[str, int]] = Field(min_length=1)
    seeds: list[int] = Field(default_factory=lambda: [0, 1, 2])
    atol: float = 1e-5
    rtol: float = 1e-5
    kernel: str = Field("", description="kernel the pattern is about, when the file has several")
    inplace: list[str] = Field(default_factory=list, description="inputs the launcher updates in place")
    gpu_only: str = Field("", description="why the interpreter cannot run it; empty = runs on CPU")


class Pattern(_Strict):
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


# --------------------------------------------------------------------------------------
# Analysis, retrieval, rewriting, validation
# --------------------------------------------------------------------------------------


class Bottleneck(_Strict):
    cls: BottleneckClass
    source: Literal["estimate", "ncu", "torch-trace", "evidence", "user"] = "estimate"
    numbers: dict[str, float] = Field(default_factory=dict)
    rationale: list[str] = Field(default_factory=list)


class Verdict(_Strict):
    """Result of evaluating a condition: whether it holds, where, and why."""

    ok: bool
    lines: list[int] = Field(default_factory=list)
    reasons: list[str] = Field(default_factory=list)


class Suggestion(_Strict):
    pattern_id: str
    title: str
    kernel: str
    score: float
    matched: list[str] = Field(default_factory=list, description="conditions that held, with lines")
    lines: list[int] = Field(default_factory=list)
    expected_effect: str = ""
    safety: Safety
    upstream: list[UpstreamLocation] = Field(default_factory=list)
    measured: list[Measurement] = Field(default_factory=list)
    rewrite: str | None = None
    already_applied: bool = False


class Candidate(_Strict):
    pattern_id: str
    path: str
    kernel: str = ""
    params: dict[str, Any] = Field(default_factory=dict)
    diff: str
    source: str
    original_sha256: str
    safety: Safety


class CheckResult(_Strict):
    """One local check: which layer, which shape, pass/fail and the local reason."""

    name: str
    layer: Literal["correctness", "partition", "integrity", "performance", "overlap", "serving"]
    passed: bool | None = Field(description="None = not run here (e.g. needs GPU)")
    reason: str = ""
    shape: dict[str, Any] = Field(default_factory=dict)
    details: dict[str, Any] = Field(default_factory=dict)


class EvidenceBundle(_Strict):
    op: str
    candidate: str
    baseline: str
    checks: list[CheckResult] = Field(default_factory=list)
    environment: dict[str, Any] = Field(default_factory=dict)
    created: str = ""

    @property
    def passed(self) -> bool:
        return all(c.passed is not False for c in self.checks)


class LiveImpl(_Strict):
    """One version of an op's implementation in the serving registry (patterns.serving.registry)."""

    op: str
    version: int = Field(ge=1)
    file: str = Field(description="immutable copy of the version's source; relative to the registry root on disk, absolute when returned")
    symbol: str = Field(description="entry point in the file, the op's launcher (e.g. kda_decode)")
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    pattern: str = Field("", description="pattern whose rewrite produced it; empty for the seeded baseline")
    bundle: str = Field("", description="evidence bundle (JSON) that admitted it; empty for the seeded baseline")
    accepted_by: str
    accepted_at: str = Field(description="UTC ISO-8601 time it was registered")
    origin: str = Field("", description="the file it was copied from, for the reader")


class EngineOp(_Strict):
    """Which implementation of one op the serving engine ran, and how it compared with the reference."""

    op: str
    impl: Literal["reference", "live"]
    version: int | None = Field(None, description="registry version; None for the PyTorch reference")
    pattern: str = ""
    sha256: str = ""
    file: str
    calls: int = 0
    max_abs_err: float | None = Field(None, description="with --verify: max |live - reference| over every call")
    within_tolerance: bool | None = Field(None, description="with --verify: every call within the op's tolerance")
    mismatch: str = Field("", description="with --verify: the first element outside the tolerance")


class EngineReport(_Strict):
    """One batched generation of the serving engine: latency metrics and what ran."""

    device: str
    impl: Literal["reference", "live"]
    model: dict[str, Any]
    batch: int
    prompt_len: int
    new_tokens: int
    ttft_ms: float = Field(description="time to first token: the prompt's steps and the first sampled token")
    itl_ms_median: float = Field(description="inter-token latency, median over the decode steps")
    itl_ms_p90: float
    tokens_per_s: float = Field(description="generated tokens of the whole batch per second of generation")
    ops: list[EngineOp]
    tokens: list[list[int]] = Field(description="generated token ids per sequence")


class KernelReport(_Strict):
    """`patterns suggest` for one kernel: its bottleneck and what to do about it."""

    kernel: str
    path: str
    line: int
    gpu: str
    bottleneck: Bottleneck
    other_bottlenecks: list[Bottleneck] = Field(default_factory=list)
    suggestions: list[Suggestion] = Field(default_factory=list)
    already_applied: list[Suggestion] = Field(default_factory=list)


class SuggestReport(_Strict):
    """The JSON output of `patterns suggest` (schema: docs/suggest.schema.json)."""

    schema_version: Literal[1] = 1
    tool: str = "patterns"
    file: str
    gpu: str
    shapes: dict[str, int] = Field(default_factory=dict)
    profile: str | None = None
    kernels: list[KernelReport]


# --------------------------------------------------------------------------------------
# The agent (patterns.agent): hypotheses, the feedback trail, review items, the journal
# --------------------------------------------------------------------------------------


class Hypothesis(_Strict):
    """Why a pattern should help this op, in the estimate's (or a profile's) numbers, and what would show it."""

    pattern_id: str
    text: str
    prediction: str = Field(description="what the gate should show if the hypothesis is right")
    shape: dict[str, int] = Field(default_factory=dict, description="the shape whose analysis gave the numbers")
    source: Literal["estimate", "profile", "llm"] = "estimate"


class Attempt(_Strict):
    """One step of the agent's feedback trail: what it tried, what the gate said, what it did next."""

    step: int = Field(ge=1)
    pattern_id: str
    params: dict[str, Any] = Field(default_factory=dict)
    base: str = Field("target", description="'target', or the sha256 of the candidate this one was built on")
    origin: Literal["rewrite", "llm-patch"] = "rewrite"
    outcome: Literal["passed", "failed", "refused", "already-applied", "invalid"]
    layer: str = Field("", description="where it stopped: rewrite, import, llm, or the failing check's layer")
    reason: str = ""
    action: str = Field("", description="the next action the feedback chose (patterns.agent.policy.ACTIONS)")
    candidate: str = Field("", description="the candidate file, when one was written")
    sha256: str = Field("", description="sha256 of the candidate's source")
    bundle: str = Field("", description="evidence bundle JSON, when the gate ran")

    @property
    def key(self) -> tuple[str, str, str]:
        """What identifies the work: the same pattern, parameters and base are never validated twice."""
        import json

        return (self.pattern_id, json.dumps(self.params, sort_keys=True), self.base)


class ReviewItem(_Strict):
    """A validated candidate waiting for (or past) a person's decision; stored by patterns.agent.review."""

    id: str = Field(pattern=r"^[a-z0-9_]+-[0-9a-f]{10}$")
    op: str
    run: str
    target: str = Field(description="file the change merges into (kernels/<op>/baseline.py by default)")
    target_sha256: str = Field(description="the target's sha256 when the candidate was made; accept refuses if it changed")
    symbol: str = Field(description="the op's entry point (the launcher)")
    pattern_id: str
    params: dict[str, Any] = Field(default_factory=dict)
    safety: Safety
    origin: Literal["rewrite", "llm-patch"] = "rewrite"
    candidate: str
    candidate_sha256: str
    diff: str
    bundle: str
    device: str
    grid: str = Field(description="the correctness grid the gate used, e.g. 'all 4 shapes' or 'first 1 of 4 shapes'")
    hypothesis: Hypothesis
    trail: list[Attempt] = Field(default_factory=list)
    created: str
    status: Literal["pending", "accepted", "rejected"] = "pending"
    decided_by: str = ""
    decided_at: str = ""
    note: str = ""
    registry_version: int | None = None


class JournalEvent(_Strict):
    """One line of an agent run's journal (JSONL, appended and fsynced)."""

    seq: int = Field(ge=1)
    at: str
    kind: Literal["start", "resume", "plan", "validating", "attempt", "review", "merge", "finish"]
    data: dict[str, Any] = Field(default_factory=dict)


# --------------------------------------------------------------------------------------
# Draft (a skeleton the distiller proposes; drafts/<id>/pattern.yaml)
# --------------------------------------------------------------------------------------


class Draft(_Strict):
    """A pattern skeleton proposed by `patterns distill`, before review.

    The mechanical fields are filled from upstream facts and checked exactly as
    in a Pattern: id, a title, a category guess, `present_when` (the cluster's
    signature as predicates, so it runs), the upstream evidence and tags.
    The prose a person (or an LLM, checked) must write -- summary, why,
    applicability, traps, transformation, limits, safety -- may be empty or
    missing; `missing()` lists what still stands between the draft and a Pattern.
    Drafts live outside the library (load_library never reads them).
    """

    id: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    title: str = Field(min_length=8)
    category: Category
    status: Literal[Status.draft] = Status.draft
    summary: str = ""
    why: str = ""
    applicability: str = Field("", description="prose: when the technique pays, for the reviewer to turn into applies_when")
    present_when: Condition
    applies_when: AppliesWhen | None = None
    resource_limits: ResourceLimits | None = None
    transformation: Transformation | None = None
    safety: Safety | None = None
    evidence: PatternEvidence
    traps: list[Trap] = Field(default_factory=list)
    references: list[Reference] = Field(default_factory=list)
    tags: list[str] = Field(default_factory=list)
    signature: list[str] = Field(default_factory=list, description="the recurring facts the cluster shares")
    support: dict[str, int] = Field(default_factory=dict, description="project -> upstream kernels in the cluster")

    def missing(self) -> list[str]:
        """Pattern fields that are still empty or fail the Pattern schema."""
        from pydantic import ValidationError

        data = self.model_dump(mode="json", exclude={"applicability", "signature", "support"}, exclude_none=True)
        data["status"] = Status.preview.value
        try:
            Pattern.model_validate(data)
        except ValidationError as exc:
            return sorted({".".join(str(x) for x in err["loc"][:1]) for err in exc.errors()})
        return []
