"""The agent: analyse → retrieve → rewrite a scratch copy → validate → let the result choose → review.

    result = run_agent(AgentConfig(op="kda_decode", target=Path("kernels/kda_decode/baseline.py")))

1. **Analyse and retrieve** (`make_plan`): the retriever's `suggest` on the
   target file at each shape of the op's GPU grid (spec.py), with the
   element types the op's own inputs have; an explicit `--profile`, or else the
   newest GPU evidence bundle of this op's baseline in the checkout's
   `evidence/`, replaces the estimate where it can. Each pattern keeps the
   shape where it ranked highest, and its hypothesis is worded from that
   shape's numbers (hypothesis.py; a configured model may reword it). The
   plan is the ranked list of attempts: patterns with an automatic rewrite,
   and, with a model configured, patterns without one (the model's patch).
2. **Rewrite** a scratch copy (`patterns.rewriter.base.apply`) into the run
   folder; the target is never touched here.
3. **Validate** with the gate (`patterns.validation.gate.validate`): against
   the target as baseline, correctness and integrity always, performance on a
   GPU. The first failing check's layer picks the next action from the one
   table in policy.py (another parameter value, a numerics pattern stacked on
   the candidate, the next pattern, stop). Where the target itself fails the
   spec's reference (the gate's baseline-vs-reference check), the attempt's
   layer is "spec" and the run stops: every candidate would fail the same way.
4. **Review**: a passing candidate becomes a review item (review.py) with its
   diff, bundle, hypothesis and the feedback trail so far. `--auto-merge-exact`
   accepts exact codemod rewrites; `--review interactive` asks at the terminal;
   `queue` leaves items for `patterns review`. A merge ends the run: later
   rewrites must be made and validated against the merged code.

Runs live in `<agent home>/runs/<op>-<time>/`: `journal.jsonl`, `candidates/`,
`evidence/`. Resuming is automatic: a run of the same op and target (same
content), device, grid and profile whose journal has no `finish` event is
continued (`--fresh` starts a new one). The plan is read back from the
journal, attempts replay in the same order, and every attempt already
recorded is taken from the journal instead of being rewritten and validated
again; an attempt that was being validated when the run died (a `validating`
event without its `attempt`) is validated again, since its result was never
recorded. Review items are keyed by the candidate's content, so writing one
again changes nothing.
"""
from __future__ import annotations

import dataclasses
import datetime as dt
import difflib
import getpass
import os
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Generator, Iterator, Literal

from patterns.core import files
from patterns.agent.hypothesis import hypothesize
from patterns.agent.journal import Journal, JournalError, read_start
from patterns.agent.policy import (
    Action,
    Planned,
    defaults,
    first_failure,
    follow_ups,
    undone_patterns,
)
from patterns.agent.review import (
    AUTO,
    ReviewStore,
    agent_home,
    auto_merge_refusal,
    review_id,
)
from patterns.core.records import Attempt, Hypothesis, ReviewItem


class AgentError(ValueError):
    """Bad input to the agent (unknown op, missing target, unusable profile): one line, CLI exit 2."""


# what makes two invocations the same run (for resuming)
RUN_IDENTITY = ("op", "target", "target_sha256", "device", "arch", "grid", "profile")


@dataclass
class AgentConfig:
    op: str
    target: Path
    max_steps: int = 8
    review: Literal["queue", "interactive"] = "queue"
    auto_merge_exact: bool = False
    device: str = "auto"
    arch: str = "h200"  # the GPU the plan is made for: bottleneck estimates, applicability, parameter defaults
    shapes: int | None = None  # check correctness on the first N shapes of the op's CPU grid only
    profile: Path | None = None
    fresh: bool = False
    chroma_url: str | None = None  # the library index in a ChromaDB server (`patterns index --chroma-url`), shared by hosts

    @property
    def sm(self) -> int:
        """Compute capability x10 of the GPU the plan is for (0: not NVIDIA), for rewrite parameter defaults."""
        from patterns.core.hardware import gpu

        return gpu(self.arch).cuda_sm


@dataclass(frozen=True)
class GateCall:
    """One validation the loop needs; whoever answers it (Agent.gate here, a Ray task in
    patterns.agent.fanout) runs the gate on `candidate` against the run's target."""

    key: tuple[str, str, str]  # the attempt's key (Planned.key)
    step: int | None  # None: asked for ahead of the loop (Agent.lookahead)
    pattern_id: str
    candidate: Path
    sha256: str
    max_cost: float


@dataclass(frozen=True)
class GateOutcome:
    """What the gate said: a bundle (written at `bundle_path`), or why there is none -- the gate refused the
    input (layer "import") or the worker running it died on every try (layer "worker")."""

    bundle: Any = None  # EvidenceBundle
    bundle_path: Path | None = None
    layer: str = ""
    reason: str = ""

    @classmethod
    def from_event(cls, data: dict[str, Any]) -> "GateOutcome":
        """From a driver's `validated` journal event (patterns.agent.fanout)."""
        if not data.get("bundle"):
            return cls(layer=data["layer"], reason=data["reason"])
        from patterns.validation.bundle import read_bundle

        return cls(bundle=read_bundle(Path(data["bundle"])), bundle_path=Path(data["bundle"]))


@dataclass
class RunResult:
    run: str
    run_dir: Path
    resumed: bool
    attempts: list[Attempt] = field(default_factory=list)
    reviews: list[ReviewItem] = field(default_factory=list)
    merged: str | None = None
    finish: str = ""
    plan: dict[str, Any] = field(default_factory=dict)


# --------------------------------------------------------------------------------------
# the target
# --------------------------------------------------------------------------------------


def prepare_device(device: str) -> str:
    """The device the gate will use; on the CPU the interpreter is switched on now, before any op module
    (whose package imports its kernels) is loaded -- the gate does the same, but later than the agent needs."""
    from patterns.core import interpreter
    from patterns.core.ops import OpError, resolve_device

    try:
        resolved = resolve_device(device)
    except OpError as exc:
        raise AgentError(str(exc)) from None
    if resolved == "cpu":
        os.environ["TRITON_INTERPRET"] = "1"
        interpreter.install_cpu_shims()
    return resolved


def _is_spec_file(path: Path) -> bool:
    """A spec.py (or any file assigning SPEC at top level, even one that no longer parses: loading it
    then names its syntax error), as opposed to a kernel file."""
    import re

    if path.name == "spec.py":
        return True
    try:
        return re.search(r"^SPEC\s*[:=]", path.read_text(encoding="utf-8"), re.MULTILINE) is not None
    except (OSError, UnicodeDecodeError):
        return False


def resolve_target(target: str, op: str | None = None) -> tuple[str, Path]:
    """(op, file) from an op name, a spec.py (or a folder with one), a kernels/<op> folder or a kernel file;
    --op names the op (a name or a spec path) when the path does not. The op is patterns.core.ops.resolve_op's
    key: the name of an op of kernels/, the absolute path of any other spec."""
    from patterns.core.ops import OpError, available_ops, resolve_op, source_path

    ops = available_ops()
    known = f"ops: {', '.join(ops)}, or a spec.py"

    def spec_of(ref: str, what: str):
        try:
            return resolve_op(ref)
        except OpError as exc:
            raise AgentError(f"{what}{exc}") from None

    if op is not None:
        op_key, op_spec = spec_of(op, "--op: ")
    path = Path(target)
    if not path.exists():
        if target in ops and (op is None or op_key == target):
            key, spec = spec_of(target, "")
            return key, source_path(spec, spec.baseline).resolve()
        raise AgentError(f"{target}: no such op, folder or file ({known})")
    if path.is_dir():
        if (path / "spec.py").is_file() and op is None:
            key, spec = spec_of(str(path), "")
            return key, source_path(spec, spec.baseline).resolve()
        folder, path = path, path / "baseline.py"
        if not path.is_file():
            raise AgentError(f"{folder}: no spec.py and no baseline.py in the folder")
    elif path.suffix != ".py":
        raise AgentError(f"{path}: not a Python file")
    elif op is None and _is_spec_file(path):
        key, spec = spec_of(str(path), "")
        return key, source_path(spec, spec.baseline).resolve()
    if op is not None:
        return op_key, path.resolve()
    name = path.resolve().parent.name
    if name not in ops:
        raise AgentError(f"{path}: cannot tell which op it implements: pass --op (a spec.py: `patterns spec init {path}` writes one; {known})")
    return name, path.resolve()


def _gate_spec(op: str, target: Path, shapes: int | None):
    """The op's spec with the target as the gate's baseline, and the grid cut to the first `shapes` shapes."""
    from patterns.core.ops import load_spec, source_path, split_target

    spec = load_spec(op)
    launcher = split_target(spec.baseline)[1]
    changes: dict[str, Any] = {}
    if source_path(spec, spec.baseline).resolve() != target:
        changes["baseline"] = f"{target}:{launcher}"
    if shapes is not None:
        if shapes < 1:
            raise AgentError(f"--shapes: must be at least 1, got {shapes}")
        changes["shapes"] = spec.shapes[:shapes]
    n = len(spec.shapes)
    grid = f"all {n} shapes" if shapes is None or shapes >= n else f"first {shapes} of {n} shapes"
    return dataclasses.replace(spec, **changes), launcher, grid


# --------------------------------------------------------------------------------------
# analyse and retrieve
# --------------------------------------------------------------------------------------


def _checkout() -> Path | None:
    root = Path(__file__).resolve().parents[2]
    return root if (root / "setup.py").is_file() and (root / "kernels").is_dir() else None


def find_evidence(op: str) -> Path | None:
    """The newest GPU evidence bundle of the op's baseline in the checkout's evidence/ folder."""
    from patterns.validation.bundle import read_bundle

    root = _checkout()
    if root is None or not (root / "evidence").is_dir():
        return None
    found = []
    for path in (root / "evidence").rglob(f"{op}--baseline.json"):
        try:
            bundle = read_bundle(path)
        except (OSError, ValueError):
            continue
        if bundle.op == op and bundle.environment.get("gpu"):
            found.append((bundle.created, str(path)))
    return Path(max(found)[1]) if found else None


def _dtypes(spec) -> tuple[str, dict[str, str]]:
    """The activation dtype the op is timed in, and the inputs whose element type differs (fp32 state, ...)."""
    import torch

    dtype = (spec.gpu_dtypes or spec.dtypes)[0]
    inputs = spec.make_inputs(dict(spec.shapes[0]), dtype, 0, "cpu")
    overrides = {}
    for name, value in inputs.items():
        if name in spec.scratch:  # working memory, not the op's data
            continue
        if isinstance(value, torch.Tensor) and value.is_floating_point():
            kind = str(value.dtype).removeprefix("torch.")
            if kind != dtype:
                overrides[name] = kind
    return dtype, overrides


def make_plan(cfg: AgentConfig, spec, llm_cfg=None, note: Callable[[str], None] = lambda _: None) -> dict[str, Any]:
    """The ranked attempts and a hypothesis for each, from the retriever at every GPU shape of the op."""
    from patterns.core.library import get
    from patterns.retriever.profile import ProfileError
    from patterns.retriever.retrieve import suggest

    dtype, overrides = _dtypes(spec)
    # the spec's shapes also name what only its input maker uses (PAGE, L_MIN): not refused, dropped (strict_names)
    shapes = [dict(s) for s in (spec.gpu_shapes or spec.shapes)]
    profile, profile_note = cfg.profile, ""
    if profile is None and cfg.op == spec.name:  # an op of kernels/: the checkout may hold its GPU evidence
        profile = find_evidence(cfg.op)
    best: dict[str, tuple[float, Any, Any, dict]] = {}
    seen: dict[str, list[tuple[str, dict, Any, list]]] = {}
    varying = [k for k in shapes[0] if len({s.get(k) for s in shapes}) > 1]
    applied: set[str] = set()
    analysis = []
    for shape in shapes:
        label = ", ".join(f"{k}={shape[k]}" for k in varying)
        try:
            report = suggest(cfg.target, shapes=shape, arch=cfg.arch, dtype=dtype, dtype_overrides=overrides, profile=profile, top=1000, chroma_url=cfg.chroma_url,
                             strict_names=False)
        except ProfileError as exc:
            if cfg.profile is not None:
                raise AgentError(str(exc)) from None
            profile_note = f"evidence not used: {exc}"
            profile = None
            report = suggest(cfg.target, shapes=shape, arch=cfg.arch, dtype=dtype, dtype_overrides=overrides, top=1000, chroma_url=cfg.chroma_url,
                             strict_names=False)
        for k in report.kernels:
            analysis.append({"shape": shape, "kernel": k.kernel, "bottleneck": k.bottleneck.model_dump(mode="json"),
                             "others": [b.cls.value for b in k.other_bottlenecks]})
            applied |= {s.pattern_id for s in k.already_applied}
            for s in k.suggestions:
                seen.setdefault(s.pattern_id, []).append((label, shape, s, [k.bottleneck, *k.other_bottlenecks]))
                if s.pattern_id not in best or s.score > best[s.pattern_id][0]:
                    best[s.pattern_id] = (s.score, s, k.bottleneck, shape)
    if profile_note:
        note(profile_note)
    ranked = sorted(best.values(), key=lambda x: (-x[0], x[1].pattern_id))
    planned, hypotheses, by_hand = [], {}, []
    source = cfg.target.read_text(encoding="utf-8")
    for score, s, _, shape in ranked:
        entry = get(s.pattern_id)
        if s.rewrite:
            origin = "rewrite"
        elif llm_cfg is not None:
            origin = "llm-patch"
        else:
            by_hand.append(s.pattern_id)
            continue
        kernel = "" if s.kernel.startswith("<") else s.kernel
        planned.append({"pattern_id": s.pattern_id, "params": defaults(entry, cfg.sm) if origin == "rewrite" else {}, "origin": origin, "kernel": kernel, "score": score})
        hyp = hypothesize(entry.pattern, seen[s.pattern_id], len(shapes), spec.acceptance.allowing_cost(entry.pattern.max_cost).min_speedup)
        if llm_cfg is not None:
            from patterns.agent.llm import LLMRejected, ask_hypothesis

            try:
                hyp = ask_hypothesis(llm_cfg, entry.pattern, hyp, source)
            except LLMRejected as exc:
                note(f"model's hypothesis for {s.pattern_id} not used: {exc}")
        hypotheses[s.pattern_id] = hyp.model_dump(mode="json")
    return {
        "planned": planned, "hypotheses": hypotheses, "by_hand": by_hand, "already_applied": sorted(applied), "analysis": analysis,
        "dtype": dtype, "overrides": overrides, "shapes": shapes, "profile": str(profile) if profile else None,
    }


# --------------------------------------------------------------------------------------
# the run
# --------------------------------------------------------------------------------------


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def find_run(runs: Path, identity: dict[str, Any], name: str | None = None) -> Path | None:
    """The newest unfinished run with the same identity (RUN_IDENTITY), to resume; runs live in
    <name>-<time>/ folders (the spec's name; the op itself where that is the name)."""
    if not runs.is_dir():
        return None
    for journal in sorted(runs.glob(f"{name or identity['op']}-*/journal.jsonl"), reverse=True):
        start = read_start(journal)
        if start is None or any(start.get(k) != identity[k] for k in RUN_IDENTITY):
            continue
        if not Journal(journal).finished:
            return journal.parent
    return None


def _alive(pid: Any) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        return True
    return True


def run_status(home: Path, op: str | None = None, on_corrupt: Callable[[str], None] | None = None) -> list[dict[str, Any]]:
    """Every run under <home>/runs, oldest first: what it ran on, whether it finished, is running in a live
    process on this host, or was interrupted (the next `patterns agent` of the same target resumes it),
    and its attempts so far. A journal that cannot be read is reported through `on_corrupt` and skipped."""
    runs = Path(home) / "runs"
    out: list[dict[str, Any]] = []
    if not runs.is_dir():
        return out
    for path in sorted(runs.glob("*/journal.jsonl"), key=lambda p: p.parent.name):
        try:
            journal = Journal(path)
        except (JournalError, OSError) as exc:
            if on_corrupt is not None:
                on_corrupt(f"skipped run {path.parent.name}: {str(exc).splitlines()[0]}")
            continue
        start = next(journal.of("start"), None)
        if start is None:
            continue
        if op is not None and start.data.get("op") != op:
            continue
        attempts = [e.data for e in journal.of("attempt")]
        finish = journal.last("finish")
        last_pid = next((e.data.get("pid") for e in reversed(journal.events) if e.kind in ("start", "resume")), None)
        state = "finished" if finish is not None else ("running" if _alive(last_pid) and last_pid != os.getpid() else "interrupted")
        outcomes: dict[str, int] = {}
        for a in attempts:
            outcomes[a.get("outcome", "?")] = outcomes.get(a.get("outcome", "?"), 0) + 1
        out.append({
            "run": path.parent.name, "op": start.data.get("op"), "target": start.data.get("target"),
            "device": start.data.get("device"), "arch": start.data.get("arch"), "started": start.at,
            "updated": journal.events[-1].at, "state": state, "attempts": len(attempts), "outcomes": outcomes,
            "reviews": (finish.data.get("reviews", []) if finish is not None else []),
            "finish": finish.data.get("reason") if finish is not None else None,
            "resumes": sum(1 for _ in journal.of("resume")), "journal": str(path),
        })
    return out


class Agent:
    def __init__(self, cfg: AgentConfig, *, home: Path | None = None, store: ReviewStore | None = None,
                 ask: Callable[[ReviewItem], str] | None = None, say: Callable[[str], None] = lambda _: None,
                 stage: Callable[[str], None] = lambda _: None, advance: Callable[[int, int], None] = lambda done, total: None,
                 gate_device: str | None = None):
        """`gate_device`: the device the gate runs on when it runs elsewhere (a Ray worker's); default: this host's."""
        from patterns.agent.llm import load_config
        from patterns.core.hardware import UnknownGPU

        self.cfg = cfg
        self.home = Path(home) if home is not None else agent_home()
        self.store = store or ReviewStore(self.home / "reviews")
        self.ask, self.say, self.stage, self.advance = ask, say, stage, advance
        self._ahead: dict[tuple[str, str, str], Attempt | str] = {}  # lookahead's rewrites, by attempt key
        self.device = gate_device or prepare_device(cfg.device)
        self.ahead = False  # set by a driver that validates ahead of the loop (patterns.agent.fanout)
        self.spec, self.launcher, self.grid = _gate_spec(cfg.op, cfg.target, cfg.shapes)
        self.name = self.spec.name  # folders and ids: the op key may be a spec's path
        if cfg.op != self.name:
            # a user's spec: reference and launcher must fit before a plan is made on them (child process)
            from patterns.specinit import SpecError, probe

            try:
                probe(Path(cfg.op), cfg.target, device=self.device)
            except SpecError as exc:
                raise AgentError(str(exc)) from None
        self.llm = load_config()
        try:
            cfg.sm  # an unknown --arch fails here, in one line
        except UnknownGPU as exc:
            raise AgentError(str(exc)) from None
        if cfg.profile is not None and not cfg.profile.is_file():
            raise AgentError(f"--profile: {cfg.profile}: no such file")

    def identity(self) -> dict[str, Any]:
        return {
            "op": self.cfg.op, "target": str(self.cfg.target), "target_sha256": files.sha256_file(self.cfg.target), "device": self.device,
            "arch": self.cfg.arch,
            "grid": self.grid, "profile": str(self.cfg.profile) if self.cfg.profile else None,
        }

    def run(self) -> RunResult:
        """The run in this process: each validation the loop asks for is the gate, called here."""
        steps = self.steps()
        try:
            call = next(steps)
            while True:
                call = steps.send(self.gate(call))
        except StopIteration as stop:
            return stop.value

    def gate(self, call: GateCall) -> GateOutcome:
        """One validation in this process (the plain, sequential path)."""
        from patterns.core.ops import OpError
        from patterns.validation.bundle import bundle_stem
        from patterns.validation.gate import validate

        out = self.run_dir / "evidence"
        try:
            bundle = validate(self.spec, call.candidate, device=self.device, out_dir=out, max_cost=call.max_cost,
                              on_stage=lambda s: self.stage(f"step {call.step}: {call.pattern_id}: {s}"))
        except OpError as exc:
            return GateOutcome(layer="import", reason=str(exc))
        return GateOutcome(bundle=bundle, bundle_path=out / f"{bundle_stem(bundle)}.json")

    def steps(self) -> Generator[GateCall, GateOutcome, RunResult]:
        """The run as a generator: it yields each validation it needs and is sent the gate's outcome.

        `run` answers in this process; a driver may answer elsewhere (patterns.agent.fanout), for several
        targets at once. Everything else -- the plan, the journal, the feedback, review -- happens here.
        """
        from patterns.core.library import load_library

        recovered = self.store.recover()
        for item_id in recovered:
            self.say(f"finished the interrupted accept of {item_id}")
        identity = self.identity()
        runs = self.home / "runs"
        run_dir = None if self.cfg.fresh else find_run(runs, identity, self.name)
        resumed = run_dir is not None
        if run_dir is None:
            stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%S%f")
            run_dir = runs / f"{self.name}-{stamp}"
        self.run_dir = run_dir
        journal = self.journal = Journal(run_dir / "journal.jsonl")
        if resumed:
            done = sum(1 for _ in journal.of("attempt"))
            journal.append("resume", {"pid": os.getpid(), "attempts_done": done})
            self.say(f"resuming run {run_dir.name}: {done} attempts already recorded")
        else:
            journal.append("start", {**identity, "pid": os.getpid(), "llm": self.llm.model if self.llm else None})
        result = RunResult(run=run_dir.name, run_dir=run_dir, resumed=resumed)

        plan_event = journal.last("plan")
        if plan_event is None:
            self.stage("analysing and retrieving")
            plan = make_plan(self.cfg, self.spec, self.llm, note=self.say)
            journal.append("plan", plan)
        else:
            plan = plan_event.data
        result.plan = plan
        entries = {e.id: e for e in load_library()}
        hypotheses = {pid: Hypothesis.model_validate(h) for pid, h in plan["hypotheses"].items()}

        recorded = {a.key: a for a in (Attempt.model_validate(e.data) for e in journal.of("attempt"))}
        # validations whose outcome a driver recorded (`validated`) but no attempt used yet: a killed driver's work
        self.validated = {(tuple(e.data["key"]), e.data["sha256"]): GateOutcome.from_event(e.data) for e in journal.of("validated")}
        queue = self.queue = deque(Planned(p["pattern_id"], p["params"], "target", p["origin"], p.get("kernel", "")) for p in plan["planned"])
        tried: dict[tuple[str, str], list[dict[str, Any]]] = {}
        candidates = self.candidates = {}
        seen = self.seen = set()
        self.recorded, self.result = recorded, result
        finish = "plan exhausted: no rewrite left to try"
        while queue:
            planned = queue.popleft()
            if planned.key in seen:
                continue
            if len(result.attempts) >= self.cfg.max_steps:
                finish = f"--max-steps {self.cfg.max_steps} reached ({len(queue) + 1} planned attempts left)"
                break
            seen.add(planned.key)
            tried.setdefault((planned.pattern_id, planned.base), []).append(planned.params)
            step = len(result.attempts) + 1
            attempt = recorded.get(planned.key)
            replayed = attempt is not None
            if attempt is None:
                made = self._rewrite(step, planned, candidates)
                if isinstance(made, Attempt):
                    attempt = made
                else:
                    call = self._candidate(step, planned, made)
                    outcome = self.validated.get((planned.key, call.sha256))
                    if outcome is None:
                        journal.append("validating", {"step": step, "key": list(planned.key), "candidate": str(call.candidate)})
                        outcome = yield call
                    attempt = self._conclude(call, planned, outcome)
            undone: list[str] = []
            if attempt.outcome == "failed" and attempt.layer == "performance" and attempt.candidate and Path(attempt.candidate).exists():
                undone = undone_patterns(Path(attempt.candidate).read_text(encoding="utf-8"), str(self.cfg.target), plan["already_applied"], entries)
            source = ""
            if attempt.outcome == "failed" and attempt.layer == "partition" and attempt.candidate and Path(attempt.candidate).exists():
                source = Path(attempt.candidate).read_text(encoding="utf-8")
            action, more = follow_ups(attempt, entries, tried, planned.kernel, undone, self.cfg.sm, source)
            if not replayed:
                attempt = attempt.model_copy(update={"action": action.value})
                journal.append("attempt", attempt.model_dump(mode="json"))
            if attempt.sha256 and attempt.candidate:
                candidates[attempt.sha256] = Path(attempt.candidate)
            result.attempts.append(attempt)
            self.say(_line(attempt, replayed))
            queue.extendleft(reversed(more))
            self.advance(len(result.attempts), min(self.cfg.max_steps, len(result.attempts) + len({q.key for q in queue} - seen)))
            if attempt.layer == "spec":
                finish = f"stopped at step {attempt.step}: {attempt.reason}; check the spec with `patterns validate SPEC`"
                break
            if action != Action.review:
                continue
            item = self._review(attempt, hypotheses, result.attempts, journal, run_dir.name)
            result.reviews.append(item)
            merged = self._decide(item)
            if merged is not None:
                journal.append("merge", {"id": merged.id, "registry_version": merged.registry_version})
                result.merged = merged.id
                finish = f"merged {merged.id} (registry v{merged.registry_version}): later rewrites must start from the merged code"
                break
        if plan.get("by_hand") and not self.llm:
            self.say(f"no automatic rewrite for: {', '.join(plan['by_hand'])} (see `patterns show ID`; a configured model can write a patch)")
        journal.append("finish", {"reason": finish, "reviews": [i.id for i in result.reviews]})
        result.finish = finish
        return result

    # -------------------------------------------------------------- one attempt
    def _rewrite(self, step: int | None, planned: Planned, candidates: dict[str, Path]) -> Attempt | str:
        """The candidate's source, or the attempt's outcome when there is nothing to validate."""
        from patterns.core.library import LibraryError, get
        from patterns.rewriter.base import AlreadyApplied, RewriteError, apply

        base_path = self.cfg.target if planned.base == "target" else candidates[planned.base]
        source = base_path.read_text(encoding="utf-8")
        common = dict(step=step or 1, pattern_id=planned.pattern_id, params=planned.params, base=planned.base, origin=planned.origin)
        if step is not None:
            self.stage(f"step {step}: {planned.pattern_id} {_params(planned.params)}")
        try:
            entry = get(planned.pattern_id)
            if planned.origin == "rewrite":
                given = {k: str(v) for k, v in planned.params.items() if v != defaults(entry).get(k)}
                return apply(planned.pattern_id, source, str(self.cfg.target), kernel=planned.kernel or None, params=given).candidate.source
            if self.llm is None:  # a run planned with a model, resumed without one
                return Attempt(**common, outcome="invalid", layer="llm", reason="no model endpoint configured now: the patch cannot be asked for")
            from patterns.agent.llm import LLMRejected, ask_patch

            try:
                return ask_patch(self.llm, entry.pattern, source, str(self.cfg.target), self.launcher)[0]
            except LLMRejected as exc:
                return Attempt(**common, outcome="invalid", layer="llm", reason=f"model's patch rejected: {exc}")
        except AlreadyApplied as exc:
            return Attempt(**common, outcome="already-applied", layer="rewrite", reason=str(exc))
        except (RewriteError, LibraryError) as exc:
            return Attempt(**common, outcome="refused", layer="rewrite", reason=str(exc))

    def candidate_name(self, step: int | None, planned: Planned, sha256: str) -> str:
        """The candidate's file name in the run's candidates/: by step here; a driver that validates ahead of
        the loop (patterns.agent.fanout) names candidates by content instead."""
        return f"{planned.pattern_id}-{sha256}.py" if self.ahead else f"{step:02d}-{planned.pattern_id}.py"

    def _candidate(self, step: int | None, planned: Planned, source: str) -> GateCall:
        """Write the candidate (atomically, into the run folder) and say what validating it takes."""
        from patterns.core.library import get

        sha = files.sha256_hex(source)
        cand = self.run_dir / "candidates" / self.candidate_name(step, planned, sha)
        cand.parent.mkdir(parents=True, exist_ok=True)
        if not cand.is_file() or files.sha256_file(cand) != sha:
            files.write_atomic(cand, source.encode())
        return GateCall(key=planned.key, step=step, pattern_id=planned.pattern_id, candidate=cand, sha256=sha,
                        max_cost=get(planned.pattern_id).pattern.max_cost)

    def _conclude(self, call: GateCall, planned: Planned, outcome: GateOutcome) -> Attempt:
        common = dict(step=call.step, pattern_id=planned.pattern_id, params=planned.params, base=planned.base, origin=planned.origin,
                      candidate=str(call.candidate), sha256=call.sha256)
        if outcome.bundle is None:
            return Attempt(**common, outcome="invalid", layer=outcome.layer, reason=outcome.reason)
        common["bundle"] = str(outcome.bundle_path)
        # the unmodified target itself disagrees with the spec's reference: every candidate would fail the same way
        wrong = next((c for c in outcome.bundle.checks if c.passed is False and c.name == "baseline-vs-reference"), None)
        if wrong is not None:
            return Attempt(**common, outcome="failed", layer="spec",
                           reason=f"the unmodified target fails the spec's reference ({wrong.reason}): the spec or its reference is wrong")
        layer, reason = first_failure(outcome.bundle)
        if not layer:
            return Attempt(**common, outcome="passed", reason=_verdict(outcome.bundle))
        return Attempt(**common, outcome="failed", layer=layer, reason=reason)

    def lookahead(self) -> Iterator[GateCall]:
        """Validations the loop will ask for later unless the feedback cuts the run short: the planned rewrites
        still queued (not a model's patch, which is asked for only in turn). A driver with idle workers
        validates these ahead; the loop still takes every outcome in its own order."""
        budget = self.cfg.max_steps - len(self.result.attempts) - 1
        for planned in list(self.queue):
            if budget <= 0:
                return
            if planned.key in self.seen or planned.key in self.recorded or planned.origin != "rewrite":
                continue
            if planned.base != "target" and planned.base not in self.candidates:
                continue
            budget -= 1
            made = self._ahead.get(planned.key)
            if made is None:
                made = self._ahead[planned.key] = self._rewrite(None, planned, self.candidates)
            if isinstance(made, str):
                yield self._candidate(None, planned, made)

    # -------------------------------------------------------------- review and decision
    def _review(self, attempt: Attempt, hypotheses: dict[str, Hypothesis], trail: list[Attempt], journal: Journal, run: str) -> ReviewItem:
        from patterns.core.library import get

        target_text = self.cfg.target.read_text(encoding="utf-8")
        cand_text = Path(attempt.candidate).read_text(encoding="utf-8")
        name = self.cfg.target.name
        diff = "".join(difflib.unified_diff(target_text.splitlines(True), cand_text.splitlines(True), f"a/{name}", f"b/{name}"))
        hyp = hypotheses.get(attempt.pattern_id) or Hypothesis(pattern_id=attempt.pattern_id, text=get(attempt.pattern_id).pattern.title, prediction="")
        item = self.store.put(ReviewItem(
            id=review_id(self.name, self.cfg.target, attempt.sha256), op=self.name, spec=self.cfg.op if self.cfg.op != self.name else "",
            run=run, target=str(self.cfg.target),
            target_sha256=files.sha256_hex(target_text), symbol=self.launcher, pattern_id=attempt.pattern_id, params=attempt.params,
            safety=get(attempt.pattern_id).pattern.safety, origin=attempt.origin, candidate=attempt.candidate,
            candidate_sha256=attempt.sha256, diff=diff, bundle=attempt.bundle, device=self.device, grid=self.grid,
            hypothesis=hyp, trail=list(trail), created=_now(),
        ))
        if not any(e.data.get("id") == item.id for e in journal.of("review")):
            journal.append("review", {"id": item.id, "step": attempt.step})
        self.say(f"review item {item.id}: {item.pattern_id} ({item.safety.value}), {item.status}")
        return item

    def _decide(self, item: ReviewItem) -> ReviewItem | None:
        """Merge now (auto-merge of an exact rewrite, or a person's accept at the prompt), or leave it queued."""
        if item.status == "accepted":
            return item
        if item.status == "rejected":
            return None
        if self.cfg.auto_merge_exact:
            from patterns.validation.bundle import read_bundle

            refusal = auto_merge_refusal(item, read_bundle(Path(item.bundle)))
            if not refusal:
                merged, m = self.store.accept(item.id, by=AUTO, automatic=True)
                self.say(f"merged {item.id} automatically (exact rewrite): registry v{merged.registry_version}" + ("" if m else "; no measurement recorded"))
                return merged
            self.say(f"{item.id} left for review: {refusal}")
        if self.cfg.review == "interactive" and self.ask is not None:
            choice = self.ask(item)
            if choice == "accept":
                merged, _ = self.store.accept(item.id, by=getpass.getuser())
                return merged
            if choice == "reject":
                self.store.reject(item.id, by=getpass.getuser(), note="rejected at the agent's prompt")
        return None


def _params(params: dict[str, Any]) -> str:
    return "(" + ", ".join(f"{k}={v}" for k, v in params.items()) + ")" if params else ""


def _verdict(bundle) -> str:
    from patterns.validation.bundle import verdict

    return f"gate: {verdict(bundle)}"


def _line(a: Attempt, replayed: bool) -> str:
    head = f"step {a.step}: {a.pattern_id}{_params(a.params)}" + (" on an earlier candidate" if a.base != "target" else "")
    tail = f" [{a.layer}] {a.reason}" if a.outcome != "passed" else f" {a.reason}"
    return f"{head}: {a.outcome}{tail} -> {a.action}" + (" (from the journal)" if replayed else "")


def run_agent(cfg: AgentConfig, **kwargs) -> RunResult:
    return Agent(cfg, **kwargs).run()


__all__ = ["AgentConfig", "AgentError", "Agent", "JournalError", "RunResult", "GateCall", "GateOutcome", "make_plan", "prepare_device", "resolve_target", "run_agent"]
