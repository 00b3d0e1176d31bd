"""The agent and the gate on a user's own kernels (issue #16): spec init, agent, review, the user's evidence.

The kernels are tests/user_kernels/ (a softmax and an RMSNorm written for these
tests, not ops of kernels/), copied into a temporary folder as a user would
have them. Every command runs as the user runs it: `python -m patterns.cli`
in a child process, with a temporary agent home (review items, runs and the
user's evidence store beside them), registry and config folder. The library's
files and kernels/ are hashed before and after: nothing a user does to their
own kernel may change them.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from patterns.core.library import LIBRARY_DIR
from patterns.core.ops import kernels_dir, load_spec

HERE = Path(__file__).parent / "user_kernels"
KERNELS = {
    # name: (kernel file, reference file, spec init arguments, launcher outputs)
    "softmax": ("softmax.py", "softmax_ref.py", ["--shape", "x=N,D", "--gpu-shape", "N=4096,D=4096", "--gpu-shape", "N=32768,D=1000"], ("y",)),
    "rmsnorm": ("rmsnorm.py", "rmsnorm_ref.py", ["--shape", "x=N,D", "--shape", "weight=D", "--dtype", "weight=float32",
                                                 "--gpu-shape", "N=8192,D=4096"], ("out",)),
}
PATTERN = "software_pipelining_num_stages"  # the exact rewrite the gate passes on both loops


@pytest.fixture
def user(tmp_path: Path) -> dict:
    work = tmp_path / "mine"
    work.mkdir()
    for kernel, ref, _, _ in KERNELS.values():
        shutil.copy(HERE / kernel, work / kernel)
        shutil.copy(HERE / ref, work / ref)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PATTERNS_LLM", "OPENAI"))}
    env.update(PATTERNS_AGENT_HOME=str(tmp_path / "agent"), PATTERNS_REGISTRY=str(tmp_path / "registry"),
               XDG_CONFIG_HOME=str(tmp_path / "config"), COLUMNS="200", TRITON_INTERPRET="1", HF_HUB_OFFLINE="1")
    env.pop("PATTERNS_LIBRARY", None)
    env.pop("PATTERNS_EVIDENCE_HOME", None)
    return {"dir": work, "env": env, "evidence": tmp_path / "agent" / "evidence"}


def cli(user: dict, *args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "patterns.cli", *map(str, args)], cwd=user["dir"], env=user["env"],
                          capture_output=True, text=True, timeout=timeout)


def init(user: dict, name: str, *extra: str) -> Path:
    kernel, ref, args, _ = KERNELS[name]
    out = user["dir"] / f"{name}_spec.py"
    r = cli(user, "spec", "init", kernel, "--reference-file", ref, *args, "--out", out.name, *extra)
    assert r.returncode == 0, r.stderr
    assert f"wrote {out.name} (checked" in r.stdout
    return out


def tree_hashes(*roots: Path) -> dict[str, str]:
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for root in roots for p in sorted(root.rglob("*"))
            if p.is_file() and "__pycache__" not in p.parts}


def one_line_error(r: subprocess.CompletedProcess, *needles: str) -> str:
    err = r.stderr.strip()
    assert r.returncode == 2, (r.returncode, r.stdout[-2000:], err[-2000:])
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    for n in needles:
        assert n in err, (n, err)
    return err


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_spec_init_writes_a_spec_the_gate_takes(user: dict, name: str) -> None:
    spec_file = init(user, name)
    spec = load_spec(str(spec_file))
    kernel, ref, _, outputs = KERNELS[name]
    assert spec.name == name and spec.outputs == outputs
    assert spec.baseline.endswith(f"{kernel}:{name}") and spec.reference.endswith(f"{ref}:{'reference' if name == 'softmax' else name}")
    # the CPU grid: small odd sizes, every symbol of the GPU shapes, no two sizes of a shape alike
    assert len(spec.shapes) >= 3 and all(set(s) == {"N", "D"} for s in spec.shapes)
    assert all(v % 2 == 1 and v <= 127 for s in spec.shapes for v in s.values())
    assert spec.gpu_shapes[0]["D"] in (4096,) and set(spec.tolerance) == {"float32", "bfloat16"} and spec.gpu_dtypes == ("bfloat16",)
    assert spec.tolerance["float32"].rtol < spec.tolerance["bfloat16"].rtol
    inputs = spec.make_inputs(dict(N=3, D=7), "bfloat16", 0, "cpu")
    assert inputs["x"].shape == (3, 7) and str(inputs["x"].dtype) == "torch.bfloat16"
    if name == "rmsnorm":  # --dtype weight=float32 pins that input; eps keeps the launcher's default
        assert inputs["weight"].shape == (7,) and str(inputs["weight"].dtype) == "torch.float32" and "eps" not in inputs
    # the spec is what `validate` takes, as a file and as its folder's spec.py
    r = cli(user, "validate", spec_file, "--device", "cpu", "--out", "ev", "--format", "json")
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads(r.stdout)["op"] == name
    shutil.copy(spec_file, user["dir"] / "spec.py")
    r = cli(user, "validate", user["dir"], "--device", "cpu", "--out", "ev2", "--format", "json")
    assert r.returncode == 0 and json.loads(r.stdout)["op"] == name, r.stderr[-2000:]
    # an existing spec is not replaced without --force
    again = cli(user, "spec", "init", kernel, "--reference-file", ref, *KERNELS[name][2], "--out", spec_file.name)
    one_line_error(again, f"{spec_file.name}: exists")


def test_a_split_parameter_gets_a_partition_check(user: dict) -> None:
    src = (user["dir"] / "softmax.py").read_text().replace("def softmax(x: torch.Tensor)", "def softmax(x: torch.Tensor, num_splits: int = 1)")
    (user["dir"] / "softmax.py").write_text(src)
    spec = load_spec(str(init(user, "softmax")))
    assert spec.partition is not None and (spec.partition.axis, spec.partition.counts) == ("num_splits", (1, 2, 3, 4))


def test_agent_review_accept_changes_the_users_file_and_store_only(user: dict) -> None:
    library_and_kernels = tree_hashes(LIBRARY_DIR, kernels_dir())
    spec_file = init(user, "softmax")
    target = user["dir"] / "softmax.py"
    r = cli(user, "agent", spec_file, "--device", "cpu", "--shapes", "2", "--max-steps", "3")
    assert r.returncode == 0, r.stderr[-3000:]
    items = json.loads(cli(user, "review", "list", "--op", spec_file, "--format", "json").stdout)
    item = next(i for i in items if i["pattern_id"] == PATTERN)
    assert (item["op"], item["spec"], item["target"], item["status"]) == ("softmax", str(spec_file.resolve()), str(target.resolve()), "pending")
    assert item["id"].startswith("softmax-")
    before = target.read_bytes()

    r = cli(user, "review", "accept", item["id"], "--by", "me")
    assert r.returncode == 0, r.stderr[-2000:]
    assert "your evidence store" in r.stdout and "error ratio" in r.stdout and "not a speed" in r.stdout
    # the user's file now holds the candidate, the user's store holds the measurement
    assert target.read_bytes() == Path(item["candidate"]).read_bytes() != before
    (rec,) = json.loads((user["evidence"] / f"{PATTERN}.json").read_text())
    assert (rec["item"], rec["op"], rec["target"]) == (item["id"], str(spec_file.resolve()), str(target.resolve()))
    assert (rec["measurement"]["metric"], rec["measurement"]["hardware"]) == ("max-rel-err-vs-baseline", "cpu, Triton interpreter")
    assert rec["measurement"]["ratio"] == 1.0  # exact rewrite: bit-identical outputs
    # ... and nothing of the library or of kernels/ changed
    assert tree_hashes(LIBRARY_DIR, kernels_dir()) == library_and_kernels

    # the run as the GPU report renders it (python -m patterns.agent.report): on a CPU nothing is timed
    r = subprocess.run([sys.executable, "-m", "patterns.agent.report", user["env"]["PATTERNS_AGENT_HOME"], "--target", "softmax=mine",
                        "--out", str(user["dir"] / "report")], env=user["env"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    (rep,) = json.loads((user["dir"] / "report" / "report.json").read_text())
    assert rep["verdict"]["kind"] == "not timed" and PATTERN in rep["verdict"]["text"]
    row = next(a for a in rep["chain"] if a["pattern_id"] == PATTERN)
    assert row["outcome"] == "passed" and row["checks"]["layers"]["correctness"]["passed"] > 0 and row["speed"] is None

    # show and suggest's data: the user's evidence under its own label, the curated list untouched
    shown = json.loads(cli(user, "show", PATTERN, "--format", "json").stdout)
    assert [e["item"] for e in shown["local_evidence"]] == [item["id"]] and item["id"] not in json.dumps(shown["evidence"])
    r = cli(user, "show", PATTERN)
    assert "your local evidence" in r.stdout and "(not speed)" in r.stdout
    # export: a patch for the library, which applies to a copy of it and changes nothing now
    r = cli(user, "evidence", "export", "--out", "ev.patch")
    assert r.returncode == 0, r.stderr
    patch = (user["dir"] / "ev.patch").read_text()
    assert patch.startswith(f"--- a/patterns/library/{PATTERN}/pattern.yaml") and "+      metric: max-rel-err-vs-baseline" in patch
    copy = user["dir"] / "checkout"
    shutil.copytree(LIBRARY_DIR, copy / "patterns" / "library", ignore=shutil.ignore_patterns("__pycache__"))
    applied = subprocess.run(["git", "apply", str(user["dir"] / "ev.patch")], cwd=copy, capture_output=True, text=True)
    assert applied.returncode == 0, applied.stderr
    assert "max-rel-err-vs-baseline" in (copy / "patterns" / "library" / PATTERN / "pattern.yaml").read_text()
    assert tree_hashes(LIBRARY_DIR, kernels_dir()) == library_and_kernels

    # the agent home brought back from the GPU machine and unpacked elsewhere: the journal's bundle paths name
    # the other machine's folder, and the report reads the bundles from the run's own folder here
    home = Path(user["env"]["PATTERNS_AGENT_HOME"])
    moved = home.with_name("unpacked-home")
    shutil.move(home, moved)
    r = subprocess.run([sys.executable, "-m", "patterns.agent.report", str(moved), "--target", "softmax=mine",
                        "--out", str(user["dir"] / "report2")], env=user["env"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    (rep2,) = json.loads((user["dir"] / "report2" / "report.json").read_text())
    row2 = next(a for a in rep2["chain"] if a["pattern_id"] == PATTERN)
    assert row2["checks"] == row["checks"] and str(home) in row2["bundle"]


def test_reject_changes_nothing(user: dict) -> None:
    spec_file = init(user, "rmsnorm")
    r = cli(user, "agent", user["dir"] / "rmsnorm_spec.py", "--device", "cpu", "--shapes", "1", "--max-steps", "4")
    assert r.returncode == 0, r.stderr[-3000:]
    (item,) = [i for i in json.loads(cli(user, "review", "list", "--format", "json").stdout) if i["pattern_id"] == PATTERN]
    watched = [LIBRARY_DIR, kernels_dir(), user["dir"]]
    before = tree_hashes(*watched)
    r = cli(user, "review", "reject", item["id"], "--by", "me", "--note", "not now")
    assert r.returncode == 0 and f"rejected {item['id']}" in r.stdout, r.stderr
    assert tree_hashes(*watched) == before and not user["evidence"].exists()
    assert json.loads(cli(user, "review", "list", "--status", "rejected", "--op", spec_file, "--format", "json").stdout)[0]["id"] == item["id"]


def test_spec_init_declares_the_accumulation(user: dict) -> None:
    """--accumulation and --reduction reach the spec (the gate's precision bound); the defaults write neither."""
    kernel, ref, args, _ = KERNELS["rmsnorm"]
    r = cli(user, "spec", "init", kernel, "--reference-file", ref, *args, "--out", "acc_spec.py", "--no-check",
            "--accumulation", "tf32", "--reduction", "D")
    assert r.returncode == 0, r.stderr
    spec = load_spec(str(user["dir"] / "acc_spec.py"))
    assert (spec.accumulation, spec.reduction, spec.reduction_length({"N": 3, "D": 127})) == ("tf32", "D", 127)
    plain = load_spec(str(init(user, "rmsnorm")))
    assert (plain.accumulation, plain.reduction, plain.reduction_length({"N": 3, "D": 127})) == ("float32", None, 127)
    one_line_error(cli(user, "spec", "init", kernel, "--reference-file", ref, *args, "--out", "x.py", "--accumulation", "int8"),
                   "--accumulation: int8: not one of float64, float32, tf32, float16, bfloat16")
    one_line_error(cli(user, "spec", "init", kernel, "--reference-file", ref, *args, "--out", "x.py", "--reduction", "K"),
                   "--reduction: K: not a dimension of the shapes (N, D)")
    assert not (user["dir"] / "x.py").exists()


def test_bad_input_is_one_line_naming_the_file(user: dict) -> None:
    d = user["dir"]
    # a launcher the spec's inputs cannot call: it unpacks a 2-D shape, the spec gives x three dimensions
    r = cli(user, "spec", "init", "softmax.py", "--reference-file", "softmax_ref.py", "--shape", "x=B,N,D", "--gpu-shape", "B=2,N=64,D=256")
    one_line_error(r, "softmax.py: the launcher softmax cannot be called with the spec's inputs", "ValueError")
    assert not (d / "spec.py").exists()
    # a parameter without a default that the command line does not give
    r = cli(user, "spec", "init", "rmsnorm.py", "--reference-file", "rmsnorm_ref.py", "--shape", "x=N,D", "--gpu-shape", "N=64,D=256")
    one_line_error(r, "rmsnorm.py:", "parameter 'weight'", "--shape weight=DIMS")
    # a reference whose output has another shape than the launcher's
    (d / "bad_ref.py").write_text("def reference(x):\n    return x.sum(-1)\n")
    r = cli(user, "spec", "init", "softmax.py", "--reference-file", "bad_ref.py", "--shape", "x=N,D", "--gpu-shape", "N=64,D=256")
    one_line_error(r, "bad_ref.py: the reference's output y has shape", "the launcher's")
    # a spec with a syntax error: validate and agent name it
    spec_file = init(user, "softmax")
    good = spec_file.read_text()
    spec_file.write_text(good.replace("SPEC = OpSpec(", "SPEC = OpSpec((", 1))
    for args in (("validate", spec_file, "--device", "cpu"), ("agent", spec_file, "--device", "cpu")):
        one_line_error(cli(user, *args), f"{spec_file.name}", "syntax error")
    # a kernel edited after its spec was written: the agent names the kernel file before planning
    spec_file.write_text(good)
    (d / "softmax.py").write_text((d / "softmax.py").read_text().replace("def softmax(x: torch.Tensor)", "def softmax(inp: torch.Tensor)")
                                  .replace("N, D = x.shape", "N, D = inp.shape").replace("empty_like(x)", "empty_like(inp)")
                                  .replace("[(N,)](x,", "[(N,)](inp,"))
    one_line_error(cli(user, "agent", spec_file, "--device", "cpu"), "softmax.py: the launcher softmax cannot be called", "TypeError")
    # a kernel file the agent cannot place, with the way out in the message
    one_line_error(cli(user, "agent", "softmax.py", "--device", "cpu"), "softmax.py: cannot tell which op it implements", "patterns spec init")


def test_an_inplace_input_the_reference_leaves_alone_is_refused(user: dict) -> None:
    """Liger's rope_forward on the H200 (issue #16): q and k declared --inplace, a reference that returns
    new tensors. The gate compares an in-place input as each side's copy holds it after the call, so the
    expected k was the unrotated input, and where the launcher rotates k in its own memory (one KV head)
    the unmodified upstream kernel failed against itself. spec init now refuses that declaration."""
    d = user["dir"]
    for f in ("scale_heads.py", "scale_heads_ref.py"):
        shutil.copy(HERE / f, d / f)
    args = ["scale_heads.py", "--reference-file", "scale_heads_ref.py", "--shape", "x=H,N,D", "--shape", "weight=D",
            "--dtype", "weight=float32", "--cpu-shape", "H=1,N=5,D=8", "--cpu-shape", "H=3,N=7,D=9", "--gpu-shape", "H=8,N=4096,D=128"]
    r = cli(user, "spec", "init", *args, "--inplace", "x")
    one_line_error(r, "scale_heads_ref.py: the reference leaves in-place input x as it was (the launcher writes it)", "--scratch",
                   "shape H=1,N=5,D=8")
    assert not (d / "spec.py").exists()
    # the launcher's writes to x are memory it returns views of: --scratch, and the gate passes the kernel against itself
    r = cli(user, "spec", "init", *args, "--scratch", "x")
    assert r.returncode == 0, r.stderr
    r = cli(user, "validate", "spec.py", "--device", "cpu", "--out", "ev", "--format", "json")
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    checks = json.loads(r.stdout)["checks"]
    assert sorted(c["shape"]["H"] for c in checks if c["name"] == "correctness" and c["passed"]) == [1, 1, 3, 3]
    # what the H200 ran: the same kernel with x declared in place fails against itself, and the gate says the
    # baseline disagrees with the reference at x (the spec is wrong, not a candidate)
    text = (d / "spec.py").read_text()
    assert "scratch=('x',)" in text
    (d / "spec.py").write_text(text.replace("scratch=('x',)", "inplace=('x',)"))
    r = cli(user, "validate", "spec.py", "--device", "cpu", "--out", "ev2", "--format", "json")
    assert r.returncode == 1, r.stderr[-2000:]
    failed = [c for c in json.loads(r.stdout)["checks"] if c["passed"] is False and c["name"] == "baseline-vs-reference"]
    assert failed and all(c["shape"]["H"] == 1 and "x[" in c["reason"] for c in failed), failed


def test_a_target_failing_its_reference_stops_the_agent(user: dict) -> None:
    """A reference with the wrong axis has the outputs' shapes (spec init's check passes), and the gate finds
    the unmodified kernel itself disagreeing with it: the first validated attempt stops the run at the spec,
    instead of every pattern failing 'correctness' on the same disagreement."""
    d = user["dir"]
    (d / "axis_ref.py").write_text("import torch\n\n\ndef reference(x):\n    return torch.softmax(x.float(), dim=0).to(x.dtype)\n")
    r = cli(user, "spec", "init", "softmax.py", "--reference-file", "axis_ref.py", "--shape", "x=N,D", "--gpu-shape", "N=64,D=256")
    assert r.returncode == 0, r.stderr
    r = cli(user, "agent", "spec.py", "--device", "cpu", "--shapes", "1", "--max-steps", "4")
    assert r.returncode == 0, r.stderr[-2000:]
    (journal,) = (Path(user["env"]["PATTERNS_AGENT_HOME"]) / "runs").glob("softmax-*/journal.jsonl")
    events = [json.loads(line) for line in journal.read_text().splitlines()]
    attempts = [e["data"] for e in events if e["kind"] == "attempt"]
    validated = [a for a in attempts if a["bundle"]]
    assert len(validated) == 1 and validated[0] == attempts[-1], attempts
    assert validated[0]["layer"] == "spec" and "fails the spec's reference" in validated[0]["reason"] and "y[" in validated[0]["reason"]
    (finish,) = [e["data"] for e in events if e["kind"] == "finish"]
    assert finish["reason"].startswith(f"stopped at step {validated[0]['step']}: the unmodified target fails the spec's reference")


def test_report_verdicts() -> None:
    from patterns.agent.report import verdict

    def row(step, pattern, outcome, layer="", reason="", geo=None, lo=None):
        speed = {"geomean": geo, "ci95": [lo, geo + 0.05], "shapes": []} if geo is not None else None
        return {"step": step, "pattern_id": pattern, "outcome": outcome, "layer": layer, "reason": reason, "speed": speed}

    faster = verdict([row(1, "a", "failed", "performance", "0.9x", 0.9, 0.85), row(2, "b", "passed", geo=1.4, lo=1.2), row(3, "c", "passed", geo=1.1, lo=1.05)])
    assert (faster["kind"], faster["pattern_id"], faster["geomean"]) == ("faster", "b", 1.4)
    # a pass whose interval reaches 1 is not a win
    flat = verdict([row(1, "b", "passed", geo=1.01, lo=0.98)])
    assert flat["kind"] == "nothing helps" and flat["layer"] == "performance" and "1.010x" in flat["reason"]
    # where most attempts stopped; the last one on a tie
    stuck = verdict([row(1, "a", "refused", "rewrite", "r1"), row(2, "b", "failed", "correctness", "c1"), row(3, "c", "refused", "rewrite", "r2")])
    assert (stuck["kind"], stuck["layer"], stuck["reason"]) == ("nothing helps", "rewrite", "r2")
    tie = verdict([row(1, "a", "refused", "rewrite", "r1"), row(2, "b", "failed", "integrity", "i1")])
    assert (tie["layer"], tie["reason"]) == ("integrity", "i1")
    assert verdict([])["layer"] == "plan"


def test_storage_order_makes_the_layout_a_launcher_expects(user: dict) -> None:
    """--storage NAME=DIMS: the tensor is drawn in that memory order and handed over in the launcher's
    order (HF attention gives q as a [B, H, T, D] view of [B, T, H, D] memory; Liger's rope relies on it:
    at T=1 a contiguous [B, H, 1, D] has another row stride once transposed back, and its kernel then
    rotates rows several times over)."""
    d = user["dir"]
    for f in ("scale_heads.py", "scale_heads_ref.py"):
        shutil.copy(HERE / f, d / f)
    args = ["scale_heads.py", "--reference-file", "scale_heads_ref.py", "--shape", "x=H,N,D", "--shape", "weight=D",
            "--dtype", "weight=float32", "--cpu-shape", "H=3,N=5,D=8", "--gpu-shape", "H=8,N=4096,D=128", "--scratch", "x"]
    r = cli(user, "spec", "init", *args, "--storage", "x=N,H,D", "--out", "laid_spec.py")
    assert r.returncode == 0, r.stderr
    assert "storage=('N', 'H', 'D')" in (d / "laid_spec.py").read_text()
    x = load_spec(str(d / "laid_spec.py")).make_inputs({"H": 3, "N": 5, "D": 8}, "float32", 0, "cpu")["x"]
    assert (tuple(x.shape), x.stride(), x.transpose(0, 1).is_contiguous()) == ((3, 5, 8), (8, 24, 1), True)
    one_line_error(cli(user, "spec", "init", *args, "--storage", "x=N,D", "--out", "bad_spec.py"),
                   "scale_heads.py: --storage x=N,D: not an order of its --shape dimensions H,N,D")
    one_line_error(cli(user, "spec", "init", *args, "--storage", "y=N,H,D", "--out", "bad_spec.py"),
                   "has no parameter y (--storage)")
    assert not (d / "bad_spec.py").exists()
