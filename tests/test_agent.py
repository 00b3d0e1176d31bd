"""The agent: a validated review item for every op, feedback-driven next actions, kill and resume, the model, bad input.

Every run targets a copy of kernels/<op>/ in a temporary folder (the agent
never writes its target; accepting is tests/test_review.py), checks
correctness on the first shape of the op's grid (`shapes=1`) to keep the
interpreter's time down, and keeps its runs and reviews in a temporary home.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from openai_stub_server import serve
from patterns.agent.journal import Journal
from patterns.agent.loop import Agent, AgentConfig, run_agent
from patterns.agent.policy import Action, Planned, defaults, follow_ups, first_failure, next_param
from patterns.agent.review import ReviewStore
from patterns.core.library import get, load_library
from patterns.core.records import Attempt, CheckResult, EvidenceBundle, JournalEvent
from patterns.validation.bundle import read_bundle
from patterns.core.ops import available_ops, kernels_dir

ALL_OPS = available_ops()


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PATTERNS_AGENT_HOME", str(tmp_path / "agent"))
    monkeypatch.setenv("PATTERNS_REGISTRY", str(tmp_path / "registry"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    for var in ("PATTERNS_LLM_BASE_URL", "PATTERNS_LLM_MODEL", "PATTERNS_LLM_API_KEY", "OPENAI_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    return tmp_path / "agent"


def copy_op(tmp_path: Path, op: str) -> Path:
    dest = tmp_path / "kernels" / op
    shutil.copytree(kernels_dir() / op, dest, ignore=shutil.ignore_patterns("__pycache__"))
    return dest / "baseline.py"


def sha(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def events(run_dir: Path) -> list[JournalEvent]:
    return Journal(run_dir / "journal.jsonl").events


# --------------------------------------------------------------------------------------
# every op
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("op", ALL_OPS)
def test_each_op_gets_a_validated_review_item(op: str, home: Path, tmp_path: Path) -> None:
    target = copy_op(tmp_path, op)
    before, shipped = target.read_bytes(), (kernels_dir() / op / "baseline.py").read_bytes()
    result = run_agent(AgentConfig(op=op, target=target, shapes=1, device="cpu", max_steps=2), home=home)

    assert result.reviews, f"{op}: no candidate passed: {[(a.pattern_id, a.outcome, a.reason) for a in result.attempts]}"
    for item in result.reviews:
        bundle = read_bundle(Path(item.bundle))
        assert bundle.passed
        passed_layers = {c.layer for c in bundle.checks if c.passed}
        assert {"correctness", "integrity"} <= passed_layers
        assert sha(Path(item.candidate)) == item.candidate_sha256 and Path(item.candidate).read_bytes() != before
        assert item.trail[-1].outcome == "passed" and item.trail[-1].sha256 == item.candidate_sha256
        assert item.diff.startswith("--- a/baseline.py\n+++ b/baseline.py\n")
        assert item.hypothesis.pattern_id == item.pattern_id and item.hypothesis.text
        assert item.status == "pending" and item.grid.startswith("first 1 of")
        assert ReviewStore(home / "reviews").get(item.id) == item
    assert target.read_bytes() == before  # the agent only writes scratch copies
    assert (kernels_dir() / op / "baseline.py").read_bytes() == shipped
    kinds = [e.kind for e in events(result.run_dir)]
    assert kinds[:2] == ["start", "plan"] and kinds[-1] == "finish"
    assert kinds.count("attempt") == len(result.attempts) <= 2
    assert kinds.count("review") == len(result.reviews)


def test_the_hypothesis_carries_the_estimate_numbers(home: Path, tmp_path: Path) -> None:
    """decode_attention at B=1 with 32k context: 32 programs on 132 SMs is the numbers the split-KV rewrite is for."""
    target = copy_op(tmp_path, "decode_attention")
    agent = Agent(AgentConfig(op="decode_attention", target=target, shapes=1, device="cpu"), home=home)
    from patterns.agent.loop import make_plan

    plan = make_plan(agent.cfg, agent.spec)
    hyp = plan["hypotheses"]["split_kv_lse_merge"]
    assert "at B=1, PAGE=0: grid of 32 programs fills 24% of 132 SMs" in hyp["text"]
    assert hyp["shape"]["B"] == 1 and hyp["source"] == "estimate"
    # the analysis behind it, one per shape of the op's GPU grid, is kept in the plan
    assert [a["shape"] for a in plan["analysis"]] == [dict(s) for s in agent.spec.gpu_shapes]
    assert "occupancy-bound" in plan["analysis"][0]["others"] + [plan["analysis"][0]["bottleneck"]["cls"]]
    # the under-filled grid at small batch and the GQA re-reads at large batch rank first
    assert {p["pattern_id"] for p in plan["planned"][:2]} == {"split_kv_lse_merge", "gqa_head_grouping"}
    assert "online_softmax" in plan["already_applied"]  # applied patterns are never planned
    assert all(p["pattern_id"] not in plan["already_applied"] for p in plan["planned"])


# --------------------------------------------------------------------------------------
# feedback: the check's layer chooses the next action (policy.ACTIONS)
# --------------------------------------------------------------------------------------


def _attempt(pattern: str, outcome: str, layer: str = "", params: dict | None = None, sha256: str = "ab" * 32) -> Attempt:
    return Attempt(step=1, pattern_id=pattern, params=params if params is not None else {}, outcome=outcome, layer=layer, sha256=sha256, candidate="c.py")


def test_failed_correctness_tries_the_next_declared_parameter() -> None:
    entries = {e.id: e for e in load_library()}
    entry = entries["fuse_v_tiles"]
    first = defaults(entry)
    warps = entry.pattern.transformation.params["num_warps"].choices
    others = [w for w in warps if w != first["num_warps"]]
    tried = {("fuse_v_tiles", "target"): [first]}
    action, more = follow_ups(_attempt("fuse_v_tiles", "failed", "correctness", first), entries, tried, kernel="k")
    assert action == Action.next_param
    assert more == [Planned("fuse_v_tiles", {**first, "num_warps": others[0]}, "target", kernel="k")]
    # every declared value tried: the pattern is given up
    tried[("fuse_v_tiles", "target")] += [{**first, "num_warps": w} for w in others]
    assert follow_ups(_attempt("fuse_v_tiles", "failed", "correctness", first), entries, tried) == (Action.next_pattern, [])
    # a slower candidate on a GPU is tuned the same way
    pipe = defaults(entries["software_pipelining_num_stages"])
    stages = [s for s in entries["software_pipelining_num_stages"].pattern.transformation.params["num_stages"].choices if s != pipe["num_stages"]]
    _, more = follow_ups(_attempt("software_pipelining_num_stages", "failed", "performance", pipe), entries, {("software_pipelining_num_stages", "target"): [pipe]})
    assert more[0].params == {**pipe, "num_stages": stages[0]}


def test_a_slower_candidate_first_gets_back_what_its_rewrite_undid() -> None:
    """Reference case 3 on an H200: fusing the V tiles cuts the grid the baseline's split had
    sized to the SMs (0.72x at B=1); the agent re-splits the fused candidate before tuning it."""
    from patterns.agent.policy import undone_patterns
    from patterns.rewriter.base import apply

    entries = {e.id: e for e in load_library()}
    target = kernels_dir() / "kda_decode" / "baseline.py"
    applied = ["hoist_tile_invariant_work", "launch_overhead_fusion", "single_pass_reduction", "split_underfilled_grid"]
    fused = apply("fuse_v_tiles", target.read_text(), str(target)).candidate.source
    assert undone_patterns(fused, str(target), applied, entries) == ["split_underfilled_grid"]
    assert undone_patterns(target.read_text(), str(target), applied, entries) == []
    cand = "ef" * 32
    slower = _attempt("fuse_v_tiles", "failed", "performance", defaults(entries["fuse_v_tiles"]), sha256=cand)
    action, more = follow_ups(slower, entries, {}, undone=["split_underfilled_grid"])
    assert action == Action.restore_undone
    assert more == [Planned("split_underfilled_grid", defaults(entries["split_underfilled_grid"]), cand)]
    # restored already: the launch parameters are tuned next
    action, more = follow_ups(slower, entries, {("split_underfilled_grid", cand): [{}]}, undone=["split_underfilled_grid"])
    assert action == Action.next_param and more[0].pattern_id == "fuse_v_tiles"


def test_parameter_defaults_follow_the_gpu_the_plan_is_for(home: Path, tmp_path: Path) -> None:
    """On an H200 the matmul's tuned 128x128x32 tiles stop at about 80% of torch.matmul with the small
    config space; the plan for sm_90 starts autotune from the Hopper space, an A100 plan from the plain default."""
    from patterns.agent.loop import make_plan

    space = get("autotune_configs_keys").pattern.transformation.params["space"]
    assert (space.default_for(0), space.default_for(80), space.default_for(90), space.default_for(100)) == ("small", "small", "hopper", "hopper")
    target = copy_op(tmp_path, "matmul")
    spaces = {}
    for arch in ("h200", "a100"):
        agent = Agent(AgentConfig(op="matmul", target=target, shapes=1, device="cpu", arch=arch), home=home)
        plan = make_plan(agent.cfg, agent.spec)
        spaces[arch] = [p["params"]["space"] for p in plan["planned"] if p["pattern_id"] == "autotune_configs_keys"]
    assert spaces == {"h200": ["hopper"], "a100": ["small"]}
    # tuning further from the arch default tries the other declared spaces
    entry = get("autotune_configs_keys")
    assert next_param(entry, [defaults(entry, 90)], 90) == {**defaults(entry, 90), "space": "small"}


def test_a_by_sm_default_must_be_one_of_the_choices() -> None:
    from pydantic import ValidationError

    from patterns.core.schema import RewriteParam

    with pytest.raises(ValidationError, match="not one of the choices"):
        RewriteParam(type="str", default="small", choices=["small", "hopper"], by_sm={90: "huge"})


def test_failed_partition_stacks_the_numerics_pattern_on_the_candidate() -> None:
    entries = {e.id: e for e in load_library()}
    cand = "cd" * 32
    # the candidate's chained fp32 dots run at TF32: of the numerics patterns only tf32x3 fits it
    source = (kernels_dir() / "cp_state_merge" / "baseline.py").read_text(encoding="utf-8")
    failed = _attempt("split_k_reduction", "failed", "partition", {"split_k": 4}, sha256=cand)
    action, more = follow_ups(failed, entries, {}, source=source)
    assert action == Action.numerics_pattern
    assert [m.pattern_id for m in more] == ["tf32x3_dot_precision"] and more[0].base == cand
    # without the candidate's text every numerics rewrite is stacked, tf32x3 among them
    assert "tf32x3_dot_precision" in [m.pattern_id for m in follow_ups(failed, entries, {})[1]]
    # already tried on that candidate: nothing left but the next pattern
    assert follow_ups(_attempt("split_k_reduction", "failed", "partition", sha256=cand), entries,
                      {("tf32x3_dot_precision", cand): [{"precision": "tf32x3"}]}, source=source) == (Action.next_pattern, [])


@pytest.mark.parametrize("outcome,layer", [("failed", "integrity"), ("refused", "rewrite"), ("already-applied", "rewrite"), ("invalid", "import")])
def test_other_outcomes_move_to_the_next_pattern(outcome: str, layer: str) -> None:
    entries = {e.id: e for e in load_library()}
    assert follow_ups(_attempt("fuse_v_tiles", outcome, layer, {"num_warps": 8, "max_block": 256}), entries, {}) == (Action.next_pattern, [])
    assert follow_ups(_attempt("fuse_v_tiles", "passed"), entries, {}) == (Action.review, [])


def test_first_failure_follows_the_gate_order() -> None:
    checks = [
        CheckResult(name="speed", layer="performance", passed=False, reason="slower"),
        CheckResult(name="tamper", layer="integrity", passed=False, reason="patches torch"),
        CheckResult(name="correctness", layer="correctness", passed=True),
        CheckResult(name="curve", layer="partition", passed=False, reason="error grows"),
    ]
    assert first_failure(EvidenceBundle(op="x", candidate="c", baseline="b", checks=checks)) == ("partition", "error grows")
    assert first_failure(EvidenceBundle(op="x", candidate="c", baseline="b", checks=checks[2:3])) == ("", "")
    assert next_param(get("tf32x3_dot_precision"), [{"precision": "tf32x3"}]) == {"precision": "ieee"}


def test_a_failing_candidate_is_not_reviewed_and_the_run_moves_on(home: Path, tmp_path: Path) -> None:
    """matmul: block pointers do not run under the interpreter -- a correctness failure with nothing to tune."""
    target = copy_op(tmp_path, "matmul")
    agent = Agent(AgentConfig(op="matmul", target=target, shapes=1, device="cpu"), home=home)
    from patterns.agent.loop import make_plan

    plan = make_plan(agent.cfg, agent.spec)
    # the planner no longer plans block_pointers on the installed Triton 3.9 (its applies_when.triton is
    # "<3.9"): the journal's plan holds it first, as a plan made for an older Triton would
    (grouped,) = [p for p in plan["planned"] if p["pattern_id"] == "grouped_pid_ordering"]
    plan["planned"] = [{**grouped, "pattern_id": "block_pointers", "params": defaults(get("block_pointers"))}, grouped]
    # the plan is read back from the journal: a run started with this one follows it
    run_dir = home / "runs" / "matmul-00000000T000000000000"
    j = Journal(run_dir / "journal.jsonl")
    j.append("start", {**agent.identity(), "pid": 0, "llm": None})
    j.append("plan", plan)
    result = agent.run()
    assert result.run_dir == run_dir and result.resumed
    first, second = result.attempts
    assert (first.pattern_id, first.outcome, first.layer, first.action) == ("block_pointers", "failed", "correctness", "next-pattern")
    assert "raised" in first.reason and first.bundle and not read_bundle(Path(first.bundle)).passed
    assert (second.pattern_id, second.outcome) == ("grouped_pid_ordering", "passed")
    assert [i.pattern_id for i in result.reviews] == ["grouped_pid_ordering"]
    assert [a.pattern_id for a in result.reviews[0].trail] == ["block_pointers", "grouped_pid_ordering"]  # the trail that led to it


# --------------------------------------------------------------------------------------
# killed mid-run, resumed
# --------------------------------------------------------------------------------------


def _cli_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PATTERNS_LLM", "OPENAI"))}
    env.update(PATTERNS_AGENT_HOME=str(tmp_path / "agent"), PATTERNS_REGISTRY=str(tmp_path / "registry"),
               XDG_CONFIG_HOME=str(tmp_path / "config"), COLUMNS="200", TRITON_INTERPRET="1")
    return env


def test_killed_run_resumes_without_losing_or_repeating_validated_work(tmp_path: Path) -> None:
    target = copy_op(tmp_path, "kda_decode")
    cmd = [sys.executable, "-m", "patterns.cli", "agent", str(target), "--shapes", "1", "--device", "cpu"]
    env = _cli_env(tmp_path)
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    runs = tmp_path / "agent" / "runs"
    deadline = time.time() + 300
    killed_in = None
    try:
        while time.time() < deadline and proc.poll() is None:
            journals = list(runs.glob("kda_decode-*/journal.jsonl"))
            if journals:
                lines = [json.loads(x) for x in journals[0].read_text().splitlines() if x.endswith("}")]
                kinds = [x["kind"] for x in lines]
                # the first attempt validated and recorded, the second one being validated: kill now
                if kinds.count("attempt") >= 1 and kinds[-1] == "validating":
                    proc.send_signal(signal.SIGKILL)
                    killed_in = lines[-1]["data"]["key"]
                    break
            time.sleep(0.1)
    finally:
        proc.wait(60)
    assert killed_in is not None, f"never caught the run mid-validation: {proc.stderr.read().decode()[-2000:]}"
    assert proc.returncode == -signal.SIGKILL
    journal_path = next(runs.glob("kda_decode-*/journal.jsonl"))
    with open(journal_path, "ab") as f:  # a kill mid-write leaves a line cut short
        f.write(b'{"seq": 99, "at": "2026-')
    before = Journal(journal_path).events
    done_before = [e.data for e in before if e.kind == "attempt"]

    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "resuming run" in done.stderr
    assert len(list(runs.glob("kda_decode-*"))) == 1  # the same run, continued
    after = Journal(journal_path).events  # every line parses: the cut-short line is gone
    assert after[: len(before)] == before
    kinds = [e.kind for e in after]
    assert kinds.count("start") == 1 and kinds.count("resume") == 1 and kinds[-1] == "finish"
    attempts = [Attempt.model_validate(e.data) for e in after if e.kind == "attempt"]
    keys = [a.key for a in attempts]
    assert len(keys) == len(set(keys)), "a validated attempt was repeated"
    assert [a.model_dump() for a in attempts[: len(done_before)]] == [Attempt.model_validate(d).model_dump() for d in done_before]
    validating = [tuple(e.data["key"]) for e in after if e.kind == "validating"]
    assert validating.count(tuple(killed_in)) == 2  # its result was never recorded, so it ran again
    assert all(validating.count(k) == 1 for k in validating if k != tuple(killed_in))
    store = ReviewStore(tmp_path / "agent" / "reviews")
    passed = [a for a in attempts if a.outcome == "passed"]
    assert len(passed) >= 2 and sorted(i.candidate_sha256 for i in store.list()) == sorted(a.sha256 for a in passed)


# --------------------------------------------------------------------------------------
# the model (a local OpenAI-compatible server)
# --------------------------------------------------------------------------------------


def _warp_specialized(source: str) -> str:
    loop = "for i_k in range(0, K, BK):"
    assert loop in source
    return source.replace(loop, "for i_k in tl.range(0, K, BK, warp_specialize=True):")


def test_model_hypotheses_and_patches_go_through_the_same_gate(home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = copy_op(tmp_path, "matmul")
    source = target.read_text()

    def answer(body: dict) -> str:
        name = body["response_format"]["json_schema"]["name"]
        user = body["messages"][-1]["content"]
        if name == "hypothesis":
            if "grouped_pid_ordering" in user.splitlines()[0]:
                return json.dumps({"hypothesis": "Grouping M tiles keeps B's columns in L2 across neighbouring programs.",
                                   "prediction": "bit-identical output, fewer L2 misses on a GPU"})
            return json.dumps({"hypothesis": "see https://evil.example.com/x for why", "prediction": "it is faster"})
        if "warp_specialization" in user.splitlines()[0]:
            return json.dumps({"source": _warp_specialized(source), "summary": "warp-specialize the K loop"})
        return json.dumps({"source": "import os\n" + source, "summary": "descriptors for the tiles"})

    with serve([answer]) as stub:
        monkeypatch.setenv("PATTERNS_LLM_BASE_URL", stub.base_url)
        monkeypatch.setenv("PATTERNS_LLM_MODEL", "stub-model")
        monkeypatch.setenv("PATTERNS_LLM_API_KEY", "test-key")
        agent = Agent(AgentConfig(op="matmul", target=target, shapes=1, device="cpu", max_steps=12), home=home)
        from patterns.agent.loop import make_plan

        plan = make_plan(agent.cfg, agent.spec, agent.llm)
        # only the patterns the tests above already exercise, plus the two a model must write
        keep = ("grouped_pid_ordering", "tma_tensor_descriptors", "warp_specialization")
        plan["planned"] = [p for p in plan["planned"] if p["pattern_id"] in keep]
        run_dir = home / "runs" / "matmul-00000000T000000000000"
        j = Journal(run_dir / "journal.jsonl")
        j.append("start", {**agent.identity(), "pid": 0, "llm": "stub-model"})
        j.append("plan", plan)
        result = agent.run()
        requests = list(stub.requests)

    assert plan["hypotheses"]["grouped_pid_ordering"]["source"] == "llm"
    assert plan["hypotheses"]["persistent_tile_loop"]["source"] == "estimate"  # the URL answer was rejected
    assert {p["pattern_id"]: p["origin"] for p in plan["planned"]} == {
        "grouped_pid_ordering": "rewrite", "tma_tensor_descriptors": "llm-patch", "warp_specialization": "llm-patch"}
    by = {a.pattern_id: a for a in result.attempts}
    assert by["tma_tensor_descriptors"].outcome == "invalid" and "imports os" in by["tma_tensor_descriptors"].reason
    assert by["warp_specialization"].outcome == "passed" and by["warp_specialization"].origin == "llm-patch"
    items = {i.pattern_id: i for i in result.reviews}
    assert items["warp_specialization"].origin == "llm-patch" and "warp_specialize=True" in items["warp_specialization"].diff
    assert items["grouped_pid_ordering"].hypothesis.source == "llm"
    patch_requests = [r for r in requests if r["response_format"]["json_schema"]["name"] == "patch"]
    assert len(patch_requests) == 2 and all(r["model"] == "stub-model" for r in requests)
    # a model's patch never merges without a person, even where the pattern is exact
    from patterns.agent.review import ReviewError

    with pytest.raises(ReviewError, match="a model's patch: a person must accept"):
        ReviewStore(home / "reviews").accept(items["warp_specialization"].id, by="bot", automatic=True)


# --------------------------------------------------------------------------------------
# bad input: one line, exit 2
# --------------------------------------------------------------------------------------


def _main(capsys: pytest.CaptureFixture, *args: str) -> tuple[int, str]:
    from patterns.cli import main

    with pytest.raises(SystemExit) as exc:
        main(list(args))
    return exc.value.code, capsys.readouterr().err


def test_bad_input(home: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    target = copy_op(tmp_path, "rmsnorm_gate")
    stray = tmp_path / "elsewhere" / "kernel.py"
    stray.parent.mkdir()
    stray.write_text(target.read_text())
    (tmp_path / "notes.txt").write_text("x")
    cases = [
        (("agent", "nope"), "error: nope: no such op, folder or file"),
        (("agent", "rmsnorm_gate", "--op", "nope"), "error: --op: unknown op 'nope'"),
        (("agent", str(tmp_path / "missing.py")), f"error: {tmp_path / 'missing.py'}: no such op, folder or file"),
        (("agent", str(tmp_path / "notes.txt")), "error: "),
        (("agent", str(stray)), f"error: {stray.resolve()}: cannot tell which op it implements: pass --op"),
        (("agent", "rmsnorm_gate", "--review", "maybe"), "error: --review: 'maybe' is not queue or interactive"),
        (("agent", "rmsnorm_gate", "--device", "tpu"), "error: unknown device 'tpu'"),
        (("agent", "rmsnorm_gate", "--profile", str(tmp_path / "none.json")), "error: --profile: "),
        (("review", "show", "kda_decode-0000000000"), "error: no review item 'kda_decode-0000000000'"),
    ]
    for args, message in cases:
        code, err = _main(capsys, *args)
        assert code == 2 and err.startswith(message) and len(err.strip().splitlines()) == 1, (args, err)

    # a damaged journal of the run that would be resumed
    agent = Agent(AgentConfig(op="rmsnorm_gate", target=target, shapes=1, device="cpu"), home=home)
    journal = home / "runs" / "rmsnorm_gate-00000000T000000000000" / "journal.jsonl"
    j = Journal(journal)
    j.append("start", {**agent.identity(), "pid": 0, "llm": None})
    with open(journal, "ab") as f:
        f.write(b'{"seq": 2, "kind": "plan"}\n')
        f.write(b'{"seq": 3, "at": "x", "kind": "finish", "data": {}}\n')
    code, err = _main(capsys, "agent", str(target), "--shapes", "1", "--device", "cpu")
    assert code == 2 and err.startswith(f"error: {journal}:2: corrupt journal") and len(err.strip().splitlines()) == 1
    assert "Traceback" not in err


def test_agent_status_lists_runs_as_json(home: Path, tmp_path: Path) -> None:
    """`patterns agent status --format json`: every run, finished or interrupted, with its attempts;
    a damaged journal is named on stderr and the rest are still listed."""
    target = copy_op(tmp_path, "rmsnorm_gate")
    result = run_agent(AgentConfig(op="rmsnorm_gate", target=target, shapes=1, device="cpu", max_steps=1), home=home)
    done = result.run_dir
    # a run killed after its first attempt: a prefix of a journal, ending before `finish`
    lines = (done / "journal.jsonl").read_text().splitlines(keepends=True)
    cut = next(i for i, ln in enumerate(lines) if json.loads(ln)["kind"] == "attempt") + 1
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    start = json.loads(lines[0])
    start["data"]["pid"] = dead.pid
    killed = home / "runs" / "rmsnorm_gate-00000000T000000"
    killed.mkdir(parents=True)
    (killed / "journal.jsonl").write_text(json.dumps(start) + "\n" + "".join(lines[1:cut]))
    broken = home / "runs" / "rmsnorm_gate-99999999T999999"
    broken.mkdir()
    (broken / "journal.jsonl").write_text('{"seq": 1, "kind": "start"}\n')
    env = {**os.environ, "PATTERNS_AGENT_HOME": str(home)}
    out = subprocess.run([sys.executable, "-m", "patterns.cli", "agent", "status", "--format", "json"], capture_output=True, text=True,
                         env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)
    assert [r["run"] for r in rows] == [killed.name, done.name]
    assert [r["state"] for r in rows] == ["interrupted", "finished"]
    assert rows[1]["attempts"] == len(result.attempts) == 1
    assert rows[1]["outcomes"] == {result.attempts[0].outcome: 1}
    assert rows[1]["reviews"] == [i.id for i in result.reviews] and rows[1]["finish"] == result.finish
    assert rows[0]["attempts"] == 1 and rows[0]["finish"] is None and rows[0]["op"] == "rmsnorm_gate"
    assert f"skipped run {broken.name}: " in out.stderr
    table = subprocess.run([sys.executable, "-m", "patterns.cli", "agent", "status", "--op", "nope"], capture_output=True, text=True,
                           env={**env, "COLUMNS": "80"}, timeout=300)
    assert table.returncode == 0 and "0 agent runs" in table.stdout
    assert max(len(ln) for ln in table.stdout.splitlines()) <= 80
