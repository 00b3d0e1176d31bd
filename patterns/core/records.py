"""Records the stages hand each other: the bottleneck, suggestions and the suggest
report, candidates, checks and evidence bundles, serving registry and engine
records (and the engine's end-to-end comparisons), the agent's hypotheses, trail,
review items (with their end-to-end judgement) and journal, and drafts.

No cache key depends on this module: editing a record invalidates nothing.
"""
from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, computed_field, model_validator

from patterns.core.schema import (
    AppliesWhen,
    BottleneckClass,
    Category,
    Condition,
    Example,
    Measurement,
    Pattern,
    PatternEvidence,
    Reference,
    ResourceLimits,
    Safety,
    Status,
    StrictModel,
    Transformation,
    Trap,
    UpstreamLocation,
)


class Bottleneck(StrictModel):
    cls: BottleneckClass
    source: Literal["estimate", "ncu", "torch-trace", "evidence", "user"] = "estimate"
    numbers: dict[str, float] = Field(default_factory=dict)
    rationale: list[str] = Field(default_factory=list)


class Suggestion(StrictModel):
    pattern_id: str
    title: str
    kernel: str
    score: float
    matched: list[str] = Field(default_factory=list, description="conditions that held, with lines")
    lines: list[int] = Field(default_factory=list)
    expected_effect: str = ""
    safety: Safety
    upstream: list[UpstreamLocation] = Field(default_factory=list)
    measured: list[Measurement] = Field(default_factory=list, description="the library's curated measurements")
    local_measured: list[Measurement] = Field(default_factory=list, description="the user's own measurements (their evidence store), apart from the library's")
    rewrite: str | None = None
    rewrite_checked: bool = Field(False, description="whether the rewrite's preconditions were run on this kernel (suggest --check-rewrites; automatic for up to 3 rewrites)")
    rewrite_refusal: str = Field("", description="why `patterns apply` would refuse the rewrite on this kernel (its preconditions do not hold); empty when it applies or was not checked")
    already_applied: bool = False


class Candidate(StrictModel):
    pattern_id: str
    path: str
    kernel: str = ""
    params: dict[str, Any] = Field(default_factory=dict)
    diff: str
    source: str
    original_sha256: str
    safety: Safety


class CheckResult(StrictModel):
    """One local check: which layer, which shape, pass/fail and the local reason."""

    name: str
    layer: Literal["correctness", "partition", "integrity", "performance", "overlap", "serving"]
    passed: bool | None = Field(description="None = not run here (e.g. needs GPU)")
    reason: str = ""
    shape: dict[str, Any] = Field(default_factory=dict)
    details: dict[str, Any] = Field(default_factory=dict)


class EvidenceBundle(StrictModel):
    """What the gate found on one candidate. `verdict`, in the JSON beside the checks, is derived from
    them (never stored on its own): "pass" when no check failed (checks not run here, such as speed
    on a CPU, do not fail), "rejected" when an integrity check failed (the candidate cheated, or
    did what the sandbox forbids, or hung or crashed it), "fail" when only other checks failed
    (wrong results, error growing over partitions, too slow)."""

    op: str
    candidate: str
    baseline: str
    checks: list[CheckResult] = Field(default_factory=list)
    environment: dict[str, Any] = Field(default_factory=dict)
    created: str = ""

    @model_validator(mode="before")
    @classmethod
    def _derived_verdict(cls, data: Any) -> Any:
        """A bundle read back carries its verdict: dropped here and derived again from the checks."""
        if isinstance(data, dict) and "verdict" in data:
            data = {k: v for k, v in data.items() if k != "verdict"}
        return data

    @computed_field  # type: ignore[prop-decorator]
    @property
    def verdict(self) -> Literal["pass", "fail", "rejected"]:
        failing = [c for c in self.checks if c.passed is False]
        if not failing:
            return "pass"
        return "rejected" if any(c.layer == "integrity" for c in failing) else "fail"

    @property
    def passed(self) -> bool:
        return self.verdict == "pass"


class LiveImpl(StrictModel):
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


class EngineOp(StrictModel):
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


class EngineReport(StrictModel):
    """One batched generation of the serving engine: latency metrics and what ran."""

    device: str
    impl: Literal["reference", "live"]
    mode: Literal["eager", "graph"] = Field(description="decode steps launched op by op, or replayed from a CUDA graph")
    bucket: int = Field(description="the batch size the steps ran at (graph mode pads the batch to its bucket)")
    model: dict[str, Any]
    batch: int
    prompt_len: int
    new_tokens: int
    ttft_ms: float = Field(description="time to first token: the prompt's prefill and the first sampled token")
    itl_ms_median: float = Field(description="inter-token latency, median (p50) over the decode steps")
    itl_ms_p99: float
    tokens_per_s: float = Field(description="output tokens of the whole batch per second of decoding (after the first token)")
    ops: list[EngineOp]
    tokens: list[list[int]] = Field(description="generated token ids per sequence")


class OpShare(StrictModel):
    """One op's part of a decode step, from a profiler trace."""

    op: str = Field(description="an op of the engine, 'glue' (the PyTorch kernels between ops) or 'idle' (the device between kernels)")
    ms_per_step: float
    share: float = Field(description="of the step's time")


class StepProfile(StrictModel):
    arm: str
    source: Literal["device", "host"] = Field(description="device: kernel times from the GPU trace; host: profiler ranges around each op (eager, CPU)")
    step_ms: float = Field(description="the step's time in the timed rounds (the shares' denominator)")
    steps: int = Field(description="decode steps profiled")
    replayed: bool = Field(False, description="the profiled steps were graph replays (else eager steps: the same kernels, launched one by one)")
    ops: list[OpShare]
    trace: str = Field("", description="Chrome trace JSON (Perfetto) of the profiled steps, when kept")


class ArmMeasure(StrictModel):
    """One side of an end-to-end comparison at one shape: its decode rounds."""

    tokens_per_s: float = Field(description="median over rounds of the batch's output tokens per second of decoding")
    itl_ms_p50: float
    itl_ms_p99: float = Field(description="over every step of every round")
    step_ms: list[float] = Field(description="per round, the mean time of a decode step")


class ShapeComparison(StrictModel):
    batch: int
    context: int = Field(description="tokens each sequence holds when the timed steps start")
    steps: int
    arms: dict[str, ArmMeasure] = Field(default_factory=dict)
    ratio: float | None = Field(None, description="candidate tokens/s over baseline tokens/s: median of the per-round ratios (> 1: faster)")
    ci95: list[float] = Field(default_factory=list)
    ratios: list[float] = Field(default_factory=list)
    profiles: list[StepProfile] = Field(default_factory=list)
    error: str = Field("", description="why this shape was not measured (out of memory, out of time)")
    note: str = Field("", description="how the measurement departed from the plan (a step measured eagerly because its capture failed)")


class TTFTComparison(StrictModel):
    context: int
    arms: dict[str, list[float]] = Field(description="time to first token of one request, ms, per run")
    ratio: float = Field(description="baseline TTFT over candidate TTFT, median of the per-run ratios (> 1: faster)")
    ci95: list[float]


class ServingComparison(StrictModel):
    """The engine with two bindings of ops interleaved in one process (patterns.serving.compare)."""

    device: str
    mode: Literal["eager", "graph"]
    preset: str = Field("", description="the model preset's name (serving/model.py PRESETS), when it was one")
    model: dict[str, Any]
    baseline: str = Field(description="the first arm's label, e.g. 'v1' or 'kda_decode=v2'")
    candidate: str = Field(description="the second arm's label, e.g. 'live'")
    arms: dict[str, list[EngineOp]] = Field(description="what each arm ran")
    shapes: list[ShapeComparison] = Field(default_factory=list)
    ttft: list[TTFTComparison] = Field(default_factory=list)
    checks: dict[str, Any] = Field(default_factory=dict, description="verify (every live op against its reference) and graph-vs-eager tokens")
    environment: dict[str, Any] = Field(default_factory=dict)

    def best(self) -> ShapeComparison | None:
        """The measured shape with the highest ratio."""
        measured = [s for s in self.shapes if s.ratio is not None]
        return max(measured, key=lambda s: s.ratio) if measured else None


class KernelReport(StrictModel):
    """`patterns suggest` for one kernel: its bottleneck and what to do about it."""

    kernel: str
    path: str
    line: int
    gpu: str
    bottleneck: Bottleneck
    other_bottlenecks: list[Bottleneck] = Field(default_factory=list)
    suggestions: list[Suggestion] = Field(default_factory=list)
    already_applied: list[Suggestion] = Field(default_factory=list)


class SuggestReport(StrictModel):
    """The JSON output of `patterns suggest` (schema: docs/suggest.schema.json)."""

    schema_version: Literal[1] = 1
    tool: str = "patterns"
    file: str
    gpu: str
    shapes: dict[str, int] = Field(default_factory=dict)
    profile: str | None = None
    triton: str | None = Field(None, description="the Triton version the version gates assumed (--triton, else the installed one)")
    inputs: dict[str, str] = Field(default_factory=dict, description="--input tensors as given, NAME -> D0xD1:DTYPE")
    kernels: list[KernelReport]


class Hypothesis(StrictModel):
    """Why a pattern should help this op, in the estimate's (or a profile's) numbers, and what would show it."""

    pattern_id: str
    text: str
    prediction: str = Field(description="what the gate should show if the hypothesis is right")
    shape: dict[str, int] = Field(default_factory=dict, description="the shape whose analysis gave the numbers")
    source: Literal["estimate", "profile", "llm"] = "estimate"


class Attempt(StrictModel):
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


class EndToEnd(StrictModel):
    """An accepted version judged end to end: the engine with the op's previous and new versions interleaved in one
    process (`patterns serving compare`), beside the gate's kernel ratio; set on the review item after the accept."""

    op: str
    previous_version: int
    new_version: int
    hardware: str
    kernel_ratio: float | None = Field(None, description="the gate's geometric-mean speed ratio over the op's GPU shapes")
    ratio: float = Field(description="output tokens/s, new over previous, at the best measured shape (> 1: faster)")
    ci95: list[float]
    shape: dict[str, int] = Field(description="that shape: batch and context")
    op_share: float | None = Field(None, description="the op's share of the previous version's step at that shape")
    op_ratio: float | None = Field(None, description="the op's time per step, previous over new, in the engine at that shape")
    verdict: Literal["shows", "within-noise", "slower"]
    flag: str = Field("", description="set when a kernel win does not show end to end, or the engine got slower: why, in one line")
    source: str = Field(description="the comparison JSON")


class ReviewItem(StrictModel):
    """A validated candidate waiting for (or past) a person's decision; stored by patterns.agent.review."""

    id: str = Field(pattern=r"^[a-z0-9_]+-[0-9a-f]{10}$")
    op: str
    spec: str = Field("", description="the spec.py of a user's op (patterns spec init); empty for an op of kernels/")
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
    end_to_end: EndToEnd | None = Field(None, description="after the accept, on a GPU: the engine's tokens/s with the previous and the new version")


class JournalEvent(StrictModel):
    """One line of an agent run's journal (JSONL, appended and fsynced). With `--ray` the driver also
    records each task: `submitted`, `retry` (its worker died), `validated` (the outcome, once per candidate)."""

    seq: int = Field(ge=1)
    at: str
    kind: Literal["start", "resume", "plan", "validating", "attempt", "review", "merge", "finish", "submitted", "retry", "validated"]
    data: dict[str, Any] = Field(default_factory=dict)


class Draft(StrictModel):
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
    example: Example | None = Field(None, description="how before.py/after.py run against reference.py, once a person wrote them")
    signature: list[str] = Field(default_factory=list, description="the technique's condition, as a reader says it")
    support: dict[str, int] = Field(default_factory=dict, description="project -> upstream locations where present_when holds")
    contrast: dict[str, float] = Field(default_factory=dict, description="share of the upstream subjects of its scope where present_when holds (held / subjects)")
    notes: list[str] = Field(default_factory=list, description="the distiller's notes for the reviewer: support, contrast, overlaps, guesses")

    def missing(self) -> list[str]:
        """Pattern fields that are still empty or fail the Pattern schema."""
        from pydantic import ValidationError

        data = self.model_dump(mode="json", exclude={"applicability", "signature", "support", "contrast", "notes"}, exclude_none=True)
        data["status"] = Status.preview.value
        try:
            Pattern.model_validate(data)
        except ValidationError as exc:
            return sorted({".".join(str(x) for x in err["loc"][:1]) for err in exc.errors()})
        return []

