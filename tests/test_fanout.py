"""The agent's validations as Ray tasks (patterns.agent.fanout) on a real local Ray head.

One head for the module: `ray start --head --block` on 127.0.0.1 with CPU workers only and a
custom resource `validator: 2` standing in for two GPUs; it is stopped by its process group
(the head and everything it started) at the end. Three targets: matmul, a broken copy of matmul
(its output scaled by 1.5: the unmodified kernel fails the reference, so its run stops at the first
validation) and rmsnorm_gate, at `--max-steps 5`. Each Ray run is compared with the plain run
of the same targets (made once, in this process): the same attempts, verdicts, bundles' checks,
review items and finish lines.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from patterns.agent.journal import Journal
from patterns.agent.loop import AgentConfig, run_agent
from patterns.agent.review import ReviewStore
from patterns.core.ops import kernels_dir
from patterns.core.records import Attempt
from patterns.validation.bundle import read_bundle

ray = pytest.importorskip("ray")

ENV = {"RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}  # a loopback test cluster: no token to share
TARGETS = ("matmul", "broken/matmul", "rmsnorm_gate")
MAX_STEPS = 5


# --------------------------------------------------------------------------------------
# the head, the targets, the plain run
# --------------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def head(tmp_path_factory: pytest.TempPathFactory):
    """`ray start --head` on 127.0.0.1: 2 CPUs, 2 units of `validator`; yields its address."""
    port = _free_port()
    temp = Path(tmp_path_factory.mktemp("ray"))
    log = open(temp / "head.log", "wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "ray.scripts.scripts", "start", "--head", "--block", "--node-ip-address", "127.0.0.1", "--port", str(port),
         "--num-cpus", "2", "--resources", json.dumps({"validator": 2}), "--include-dashboard", "false",
         "--disable-usage-stats", "--temp-dir", str(temp / "t")],
        env={**os.environ, **ENV}, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.time() + 120
        while b"Ray runtime started" not in (temp / "head.log").read_bytes():
            assert proc.poll() is None and time.time() < deadline, (temp / "head.log").read_text(errors="replace")[-2000:]
            time.sleep(0.5)
        yield {"address": f"127.0.0.1:{port}", "pid": proc.pid}
    finally:
        _stop_group(proc)
        log.close()


def _stop_group(proc: subprocess.Popen) -> None:
    """The head's process group (raylet, GCS, workers): SIGTERM, then SIGKILL what is left."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(15)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        pass
    try:
        deadline = time.time() + 5
        while time.time() < deadline and _group_alive(proc.pid):
            time.sleep(0.5)
        if _group_alive(proc.pid):
            os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(10)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False


@pytest.fixture(scope="module")
def targets(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    root = Path(tmp_path_factory.mktemp("targets"))
    paths = []
    for name in TARGETS:
        op = name.rpartition("/")[2]
        dest = root / name.replace("/", "-") / "kernels" / op
        shutil.copytree(kernels_dir() / op, dest, ignore=shutil.ignore_patterns("__pycache__"))
        if name.startswith("broken/"):
            src = (dest / "baseline.py").read_text()
            store = "tl.store(p_c, b_c.to(c.dtype.element_ty)"
            assert store in src
            (dest / "baseline.py").write_text(src.replace(store, "tl.store(p_c, (b_c * 1.5).to(c.dtype.element_ty)"))
        paths.append(dest / "baseline.py")
    return paths


def _homes(base: Path) -> dict[str, str]:
    return {"PATTERNS_AGENT_HOME": str(base / "agent"), "PATTERNS_REGISTRY": str(base / "registry"), "XDG_CONFIG_HOME": str(base / "config")}


@pytest.fixture(scope="module")
def plain(targets: list[Path], tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The plain run of the targets, one after another in this process: what every Ray run must equal."""
    base = Path(tmp_path_factory.mktemp("plain"))
    saved = {k: os.environ.get(k) for k in _homes(base)}
    os.environ.update(_homes(base))
    try:
        results = [run_agent(AgentConfig(op=t.parent.name, target=t, shapes=1, device="cpu", max_steps=MAX_STEPS)) for t in targets]
    finally:
        for k, v in saved.items():
            os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)
    return {"runs": [r.run_dir for r in results], "home": base / "agent", "record": _record([r.run_dir for r in results], base / "agent")}


def _cli(base: Path, address: str, targets: list[Path]) -> tuple[list[str], dict[str, str]]:
    cmd = [sys.executable, "-m", "patterns.cli", "agent", *map(str, targets), "--shapes", "1", "--device", "cpu",
           "--max-steps", str(MAX_STEPS), "--ray", address, "--ray-resource", "validator=1"]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PATTERNS_LLM", "OPENAI"))}
    env.update(_homes(base), **ENV, COLUMNS="200", TRITON_INTERPRET="1")
    return cmd, env


# --------------------------------------------------------------------------------------
# what must be equal
# --------------------------------------------------------------------------------------


NUMBER = re.compile(r"-?\d+(\.\d+)?(e[-+]?\d+)?")


def _reason(text: str, candidate: str) -> str:
    """A check's reason without the candidate's file name (`01-x.py` in a plain run, named by content with --ray)
    and without its measured numbers: a candidate that autotunes picks its config by timing, and the gate fills
    output buffers with fresh random values each run, so errors and fill values differ from run to run; which
    checks ran and their verdicts may not."""
    return NUMBER.sub("#", text.replace(Path(candidate).name, "<candidate>"))


def _attempt_view(a: Attempt) -> dict:
    """An attempt without its paths (candidate and bundle files live in each run's own folder)."""
    view = a.model_dump(exclude={"candidate", "bundle"})
    if a.bundle:
        b = read_bundle(Path(a.bundle))
        view["bundle"] = {"op": b.op, "passed": b.passed, "checks": [(c.name, c.layer, c.passed, _reason(c.reason, a.candidate)) for c in b.checks]}
    return view


def _record(run_dirs: list[Path], home: Path) -> dict:
    """Per target: the attempts in order, the review events, the finish line; and every review item."""
    per_target = []
    for run_dir in sorted(run_dirs, key=lambda d: str(Journal(d / "journal.jsonl").events[0].data["target"])):
        events = Journal(run_dir / "journal.jsonl").events
        per_target.append({
            "target": events[0].data["target"],
            "attempts": [_attempt_view(Attempt.model_validate(e.data)) for e in events if e.kind == "attempt"],
            "reviews": [e.data["id"] for e in events if e.kind == "review"],
            "finish": [e.data["reason"] for e in events if e.kind == "finish"],
        })
    items = []
    for item in sorted(ReviewStore(home / "reviews").list(), key=lambda i: i.id):
        view = item.model_dump(exclude={"run", "candidate", "bundle", "created", "trail"})
        view["trail"] = [_attempt_view(a) for a in item.trail]
        view["bundle_passed"] = read_bundle(Path(item.bundle)).passed
        items.append(view)
    return {"targets": per_target, "items": items}


def _same(got: dict, want: dict) -> None:
    """got == want, with a message that names the first difference."""
    def first(g, w, path: str) -> str | None:
        if isinstance(w, dict) and isinstance(g, dict):
            return next((d for k in sorted(set(g) | set(w)) if (d := first(g.get(k), w.get(k), f"{path}.{k}"))), None)
        if isinstance(w, (list, tuple)) and isinstance(g, (list, tuple)) and len(g) == len(w):
            return next((d for i, (x, y) in enumerate(zip(g, w)) if (d := first(x, y, f"{path}[{i}]"))), None)
        return None if g == w else f"{path}: {json.dumps(g)[:1500]}\nvs the plain run's\n{json.dumps(w)[:1500]}"

    where = first(got, want, "")
    assert where is None, where


def _runs(home: Path) -> list[Path]:
    return sorted(p.parent for p in (home / "runs").glob("*/journal.jsonl"))


def _events(run_dir: Path, kind: str) -> list[dict]:
    return [e.data for e in Journal(run_dir / "journal.jsonl").events if e.kind == kind]


def _check_once(runs: list[Path]) -> None:
    """Every candidate validated once and recorded once."""
    for run_dir in runs:
        validated = [(tuple(v["key"]), v["sha256"]) for v in _events(run_dir, "validated")]
        assert len(validated) == len(set(validated)), f"{run_dir.name}: a candidate validated twice"
        keys = [Attempt.model_validate(a).key for a in _events(run_dir, "attempt")]
        assert len(keys) == len(set(keys)), f"{run_dir.name}: an attempt recorded twice"
        # every attempt that reached the gate has its task's outcome in the journal
        gated = {(a["pattern_id"], json.dumps(a["params"], sort_keys=True), a["base"], a["sha256"])
                 for a in _events(run_dir, "attempt") if a["bundle"] or a["layer"] in ("import", "worker")}
        assert gated <= {(*k, s) for k, s in validated}


# --------------------------------------------------------------------------------------
# the tests
# --------------------------------------------------------------------------------------


def test_ray_run_equals_the_plain_run(head: dict, targets: list[Path], plain: dict, tmp_path: Path) -> None:
    record = plain["record"]
    # what the plain run is: enough validations, a target whose every candidate failed
    attempts = [a for t in record["targets"] for a in t["attempts"]]
    assert sum(1 for a in attempts if "bundle" in a) >= 8 and len(record["targets"]) == 3
    broken = next(t for t in record["targets"] if "broken" in t["target"])
    assert broken["attempts"] and all(a["outcome"] in ("failed", "refused") for a in broken["attempts"]) and not broken["reviews"]
    # its unmodified kernel fails the reference, so the agent stops at its first validation (layer "spec")
    assert len(broken["finish"]) == 1 and broken["finish"][0].startswith("stopped at step 1: the unmodified target fails the spec's reference")

    cmd, env = _cli(tmp_path, head["address"], targets)
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    runs = _runs(tmp_path / "agent")
    _same(_record(runs, tmp_path / "agent"), record)
    _check_once(runs)
    validated = [v for r in runs for v in _events(r, "validated")]
    assert len(validated) >= 8 and not [e for r in runs for e in _events(r, "retry")]
    assert len({v["worker"]["pid"] for v in validated}) >= 2  # a fresh worker process per task, two at a time
    # every target's feedback trail is printed, the one whose candidates all failed too
    assert done.stdout.count("run matmul-") == 2 and done.stdout.count("run rmsnorm_gate-") == 1
    assert " ".join(done.stdout.split()).count(" ".join(broken["finish"][0].split())) >= 1  # wrapped at COLUMNS


def _descendants(pid: int) -> dict[int, str]:
    """pid -> command line of every process below `pid`."""
    children: dict[int, list[int]] = {}
    cmdlines: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdlines[int(entry.name)] = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        ppid = int(stat.rpartition(")")[2].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    found, todo = {}, [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found[child] = cmdlines.get(child, "")
            todo.append(child)
    return found


def test_a_worker_killed_mid_validation_is_retried_and_recorded(head: dict, targets: list[Path], plain: dict, tmp_path: Path) -> None:
    cmd, env = _cli(tmp_path, head["address"], targets)
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    killed = None
    try:
        deadline = time.time() + 600
        while killed is None and proc.poll() is None and time.time() < deadline:
            tasks = [p for p, c in _descendants(head["pid"]).items() if c.startswith("ray::gate_task")]
            if tasks:
                time.sleep(1.0)  # inside the gate by now
                try:
                    os.kill(tasks[0], signal.SIGKILL)
                    killed = tasks[0]
                except ProcessLookupError:
                    pass
            time.sleep(0.2)
        out, err = proc.communicate(timeout=900)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert killed is not None, "never caught a task running"
    assert proc.returncode == 0, err[-3000:]
    runs = _runs(tmp_path / "agent")
    retries = [(r, e) for r in runs for e in _events(r, "retry")]
    assert len(retries) == 1, retries
    run_dir, retry = retries[0]
    assert retry["try"] == 1 and "died" in err
    again = [v for v in _events(run_dir, "validated") if (v["key"], v["sha256"]) == (retry["key"], retry["sha256"])]
    assert len(again) == 1 and again[0]["tries"] == 2 and again[0]["worker"]["pid"] != killed
    _check_once(runs)
    _same(_record(runs, tmp_path / "agent"), plain["record"])


def test_a_killed_driver_resumes_from_the_journal(head: dict, targets: list[Path], plain: dict, tmp_path: Path) -> None:
    # the broken target stops at its first validation and may have finished before the kill; a finished run
    # is not resumed (the same command then starts it afresh, as `patterns agent` does for a finished target),
    # so the runs in flight at the kill are the two sound targets'
    sound = [t for t in targets if "broken" not in str(t)]
    want = {**plain["record"], "targets": [t for t in plain["record"]["targets"] if "broken" not in t["target"]]}
    cmd, env = _cli(tmp_path, head["address"], sound)
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    home = tmp_path / "agent"
    caught = None
    try:
        deadline = time.time() + 600
        while caught is None and proc.poll() is None and time.time() < deadline:
            runs = _runs(home) if (home / "runs").is_dir() else []
            try:
                validated = [(r, v) for r in runs for v in _events(r, "validated")]
                submitted = [(r, s) for r in runs for s in _events(r, "submitted")]
            except ValueError:
                validated, submitted = [], []  # a line being written
            # some results recorded, some tasks in flight: kill the driver now
            if len(validated) >= 3 and len(submitted) > len(validated):
                proc.send_signal(signal.SIGKILL)
                caught = {"validated": [(r, (tuple(v["key"]), v["sha256"])) for r, v in validated]}
            time.sleep(0.2)
    finally:
        proc.wait(60)
    assert caught is not None, f"never caught the driver with tasks in flight: {proc.stderr.read().decode()[-2000:]}"
    assert proc.returncode == -signal.SIGKILL
    before = {r: Journal(r / "journal.jsonl").events for r in _runs(home)}

    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    runs = _runs(home)
    assert sorted(before) == runs  # the same runs, continued
    for r in runs:
        after = Journal(r / "journal.jsonl").events
        assert after[: len(before[r])] == before[r]
        if not any(e.kind == "finish" for e in before[r]):
            assert [e.kind for e in after].count("resume") == 1
    # nothing validated before the kill was validated again
    for r, done_key in caught["validated"]:
        assert [(tuple(v["key"]), v["sha256"]) for v in _events(r, "validated")].count(done_key) == 1
    _check_once(runs)
    _same(_record(runs, home), want)


def test_validate_as_one_ray_task(head: dict, targets: list[Path], tmp_path: Path) -> None:
    """`patterns validate OP CANDIDATE --ray`: the gate in a worker, the bundle written by the driver; a broken candidate fails."""
    cmd, env = _cli(tmp_path, head["address"], [])
    base = [sys.executable, "-m", "patterns.cli", "validate", "matmul"]
    ray_args = ["--device", "cpu", "--ray", head["address"], "--ray-resource", "validator=1", "--format", "json"]
    good = subprocess.run([*base, str(targets[0]), "-o", str(tmp_path / "good"), *ray_args], env=env, capture_output=True, text=True, timeout=600)
    bad = subprocess.run([*base, str(targets[1]), "-o", str(tmp_path / "bad"), *ray_args], env=env, capture_output=True, text=True, timeout=600)
    assert good.returncode == 0, good.stderr[-2000:]
    bundle = read_bundle(tmp_path / "good" / "matmul--baseline.json")
    assert bundle.passed and bundle.candidate == str(targets[0]) and json.loads(good.stdout)["checks"] == [c.model_dump(mode="json") for c in bundle.checks]
    assert bad.returncode == 1, bad.stderr[-2000:]
    failed = read_bundle(tmp_path / "bad" / "matmul--baseline.json")
    assert not failed.passed and any(c.layer == "correctness" and c.passed is False for c in failed.checks)


@pytest.fixture()
def chroma_server(tmp_path: Path):
    """`chroma run` on 127.0.0.1: the one library index the drivers of several hosts read."""
    import urllib.request

    chroma = shutil.which("chroma") or str(Path(sys.executable).with_name("chroma"))
    port = _free_port()
    proc = subprocess.Popen([chroma, "run", "--path", str(tmp_path / "server"), "--host", "127.0.0.1", "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 60
        while True:
            try:
                urllib.request.urlopen(url + "/api/v2/heartbeat", timeout=1)
                break
            except OSError:
                assert time.time() < deadline and proc.poll() is None, "chroma run did not come up within 60 s"
                time.sleep(0.3)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_a_driver_plans_from_the_shared_chroma_index(chroma_server: str, targets: list[Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`patterns index --chroma-url` once; a driver with `--chroma-url` (any host) makes the plan the embedded index makes,
    and builds no index of its own."""
    from patterns.agent.loop import Agent, make_plan

    env = {**os.environ, "PATTERNS_INDEX_DIR": str(tmp_path / "unused")}
    built = subprocess.run([sys.executable, "-m", "patterns.cli", "index", "--chroma-url", chroma_server], env=env, capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stderr[-2000:]
    monkeypatch.setenv("PATTERNS_AGENT_HOME", str(tmp_path / "agent"))
    plans = {}
    for url in (None, chroma_server):
        monkeypatch.setenv("PATTERNS_INDEX_DIR", str(tmp_path / ("shared" if url else "local")))
        agent = Agent(AgentConfig(op="matmul", target=targets[0], shapes=1, device="cpu", chroma_url=url))
        plans[url] = make_plan(agent.cfg, agent.spec)
    local, shared = plans[None], plans[chroma_server]
    assert [p["pattern_id"] for p in shared["planned"]] == [p["pattern_id"] for p in local["planned"]] and len(local["planned"]) >= 3
    assert shared["hypotheses"] == local["hypotheses"]
    assert (tmp_path / "local" / "snapshot.json").exists() and not (tmp_path / "shared" / "snapshot.json").exists()
    assert not (tmp_path / "unused" / "snapshot.json").exists()


# --------------------------------------------------------------------------------------
# without --ray, and bad input
# --------------------------------------------------------------------------------------


def test_without_ray_nothing_imports_it() -> None:
    probe = ("import sys\nfrom patterns.cli import main\ntry:\n    main(['suggest', sys.argv[1], '--top', '1'])\nexcept SystemExit as e:\n"
             "    assert not e.code, e.code\nprint('ray' in sys.modules, any(m.startswith('patterns.agent.fanout') for m in sys.modules))\n")
    done = subprocess.run([sys.executable, "-c", probe, str(kernels_dir() / "matmul" / "baseline.py")], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "TRITON_INTERPRET": "1"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "False False"


def test_ray_flag_and_resource_parsing() -> None:
    from patterns.agent.fanout import FanoutError, parse_resource, task_options
    from patterns.cli import ray_address_optional

    assert ray_address_optional(["agent", "--ray", "kda_decode"]) == ["agent", "--ray=local", "kda_decode"]
    assert ray_address_optional(["agent", "a", "--ray"]) == ["agent", "a", "--ray=local"]
    assert ray_address_optional(["agent", "--ray", "10.0.0.1:6379", "a"]) == ["agent", "--ray", "10.0.0.1:6379", "a"]
    assert ray_address_optional(["agent", "--ray", "ray://head:10001"]) == ["agent", "--ray", "ray://head:10001"]
    assert ray_address_optional(["agent", "--ray", "auto", "a"]) == ["agent", "--ray", "auto", "a"]
    assert parse_resource("validator=2") == ("validator", 2.0) and parse_resource("v") == ("v", 1.0)
    for bad in ("=1", "v=0", "v=x", "GPU=1", "a b=1"):
        with pytest.raises(FanoutError, match="--ray-resource: expected NAME=N"):
            parse_resource(bad)
    assert task_options("cuda", None) == {"num_cpus": 1, "num_gpus": 1}
    assert task_options("cpu", ("validator", 1.0)) == {"num_cpus": 0, "resources": {"validator": 1.0}}


def test_bad_ray_input_is_one_line(capsys: pytest.CaptureFixture, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from patterns.cli import main

    monkeypatch.setenv("PATTERNS_AGENT_HOME", str(tmp_path / "agent"))
    for args, message in [
        (["agent", "matmul", "--ray-resource", "validator=1"], "error: --ray-resource: only with --ray"),
        (["agent", "matmul", "--ray", "127.0.0.1:6399", "--ray-resource", "GPU=1"], "error: --ray-resource: expected NAME=N"),
        (["validate", "matmul", "--ray-resource", "v=1"], "error: --ray-resource: only with --ray"),
        (["agent", "matmul", "kernels/matmul", "--op", "matmul"], "error: --op: only with one TARGET"),
    ]:
        with pytest.raises(SystemExit) as exc:
            main(args)
        err = capsys.readouterr().err
        assert exc.value.code == 2 and err.startswith(message) and len(err.strip().splitlines()) == 1, (args, err)
