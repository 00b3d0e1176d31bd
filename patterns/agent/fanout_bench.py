"""Benchmark: the agent over several targets, plain (one process) and fanned out on Ray with 1, 2, 4 workers.

    python -m patterns.agent.fanout_bench --out evidence/fanout                # CPU: interpreter, custom resource
    python -m patterns.agent.fanout_bench --device cuda --workers 1 --out DIR  # one GPU: num_gpus=1 per task
    PATTERNS_INDEX_DIR=.gpuindex python -m patterns.agent.fanout_bench --plan-only --device cuda  # a GPU box's index

Every configuration runs the same targets from a fresh agent home, so each validates the same
candidates (checked: the attempts' outcomes equal the plain run's). A Ray configuration starts
its own head on 127.0.0.1 (`ray start --head --block`, stopped by its process group) with N
units of the resource the tasks ask for: `validator` on the CPU, the host's GPUs on CUDA.
Writes bench.json (every wall time and per-task time) and bench.md.
"""
from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Iterator

from patterns.core import files

TARGETS = ("matmul", "rmsnorm_gate", "kda_decode")


@contextlib.contextmanager
def local_head(resources: dict[str, float], num_cpus: int, num_gpus: int | None, temp: Path) -> Iterator[str]:
    """A Ray head on this host in its own process group; yields its address, then stops the group."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log_path = temp / f"head-{port}.log"
    cmd = [sys.executable, "-m", "ray.scripts.scripts", "start", "--head", "--block", "--node-ip-address", "127.0.0.1", "--port", str(port),
           "--num-cpus", str(num_cpus), "--resources", json.dumps(resources), "--include-dashboard", "false", "--disable-usage-stats",
           "--temp-dir", str(temp / "ray")]
    if num_gpus is not None:
        cmd += ["--num-gpus", str(num_gpus)]
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                env={**os.environ, "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"})
    try:
        deadline = time.time() + 180
        while b"Ray runtime started" not in log_path.read_bytes():
            if proc.poll() is not None or time.time() > deadline:
                raise RuntimeError(f"ray start failed: {log_path.read_text(errors='replace')[-1500:]}")
            time.sleep(0.5)
        yield f"127.0.0.1:{port}"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(15)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)


def _targets(root: Path, names: list[str]) -> list[Path]:
    from patterns.core.ops import kernels_dir

    paths = []
    for name in names:
        dest = root / "targets" / name / "kernels" / name
        if not dest.exists():
            shutil.copytree(kernels_dir() / name, dest, ignore=shutil.ignore_patterns("__pycache__"))
        paths.append(dest / "baseline.py")
    return paths


def _configs(targets: list[Path], args) -> list:
    from patterns.agent.loop import AgentConfig

    return [AgentConfig(op=t.parent.name, target=t, shapes=args.shapes, device=args.device, max_steps=args.max_steps, fresh=True) for t in targets]


def _outcomes(results) -> list[list[tuple]]:
    return [[(a.step, a.pattern_id, a.sha256, a.outcome, a.layer) for a in r.attempts] for r in results]


def _home(root: Path, name: str) -> Path:
    """A fresh agent home, registry and Triton cache for one configuration: none starts with another's compiled kernels."""
    home = root / name
    os.environ.update(PATTERNS_AGENT_HOME=str(home / "agent"), PATTERNS_REGISTRY=str(home / "registry"), TRITON_CACHE_DIR=str(home / "triton"))
    return home / "agent"


def plain_run(targets: list[Path], args, root: Path) -> dict:
    from patterns.agent.loop import Agent

    home = _home(root, "plain")
    start = time.perf_counter()
    results = [Agent(cfg, home=home).run() for cfg in _configs(targets, args)]
    wall = time.perf_counter() - start
    validations = sum(1 for r in results for a in r.attempts if a.bundle or a.layer == "import")
    return {"wall_s": round(wall, 2), "validations": validations, "outcomes": _outcomes(results)}


def ray_run(targets: list[Path], args, root: Path, workers: int) -> dict:
    import ray

    from patterns.agent.fanout import Fanout, cluster_device, connect
    from patterns.agent.journal import Journal
    from patterns.agent.loop import Agent

    gpu = args.device.startswith("cuda")
    resource = None if gpu else ("validator", 1.0)
    home = _home(root, f"ray-{workers}")  # before the head starts: its workers inherit the environment
    with local_head({} if gpu else {"validator": workers}, num_cpus=max(workers, 1) if gpu else workers,
                    num_gpus=workers if gpu else 0, temp=root) as address:
        connect(address)
        try:
            device = cluster_device(args.device, resource)
            agents = [Agent(cfg, home=home, gate_device=device) for cfg in _configs(targets, args)]
            start = time.perf_counter()
            results = Fanout(agents, resource).run()
            wall = time.perf_counter() - start
        finally:
            ray.shutdown()
    tasks, pids, ahead = [], set(), 0
    for r in results:
        events = Journal(r.run_dir / "journal.jsonl").events
        sent = {}
        for e in events:
            key = (tuple(e.data.get("key", ())), e.data.get("sha256"))
            if e.kind == "submitted":
                sent[key] = dt.datetime.fromisoformat(e.at)
                ahead += bool(e.data.get("ahead"))
            elif e.kind == "validated":
                tasks.append((dt.datetime.fromisoformat(e.at) - sent[key]).total_seconds())
                pids.add(e.data["worker"].get("pid"))
    return {"workers": workers, "wall_s": round(wall, 2), "tasks": len(tasks), "validated_ahead": ahead, "worker_processes": len(pids),
            "task_s_median": round(statistics.median(tasks), 2) if tasks else None,
            "task_s": [round(t, 2) for t in tasks], "outcomes": _outcomes(results)}


def plan_only(args) -> None:
    """The plans the runs will make (the same target copies), so the retriever's query embeddings are cached."""
    from patterns.agent.loop import Agent, make_plan

    os.environ["TRITON_INTERPRET"] = "1"
    with tempfile.TemporaryDirectory(prefix="fanout-bench-", dir="/tmp") as tmp:
        root = Path(tmp)
        for cfg in _configs(_targets(root, args.targets), args):
            agent = Agent(cfg, home=_home(root, "plan"), gate_device=args.device)
            plan = make_plan(agent.cfg, agent.spec)
            print(f"{cfg.op}: {len(plan['planned'])} planned attempts", flush=True)


def render(record: dict) -> str:
    lines = [
        f"# Fan-out benchmark ({record['device']})", "",
        f"{record['validations']} validations of {', '.join(record['targets'])} (`--shapes {record['shapes']} --max-steps {record['max_steps']}`), "
        f"on {record['machine']['cpus']} CPU cores{', ' + record['machine']['gpu'] if record['machine'].get('gpu') else ''}; "
        f"load average at the start {record['machine']['loadavg'][0]:.2f}. Command: `{record['command']}`.", "",
        "| run | workers | wall s | speed-up vs 1 worker | vs plain | median task s (submit to result) | tasks (validated ahead) | same outcomes as plain |",
        "|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    if record["plain"] is None:
        return "\n".join(lines + [""])
    lines.append(f"| plain (one process) | - | {record['plain']['wall_s']:.1f} | - | 1.00x | - | {record['validations']} | - |")
    one = next((r["wall_s"] for r in record["ray"] if r["workers"] == 1), None)
    for r in record["ray"]:
        vs1 = f"{one / r['wall_s']:.2f}x" if one else "-"
        lines.append(f"| Ray | {r['workers']} | {r['wall_s']:.1f} | {vs1} | {record['plain']['wall_s'] / r['wall_s']:.2f}x | "
                     f"{r['task_s_median']} | {r['tasks']} ({r['validated_ahead']}) | {'yes' if r['outcomes'] == record['plain']['outcomes'] else 'NO'} |")
    return "\n".join(lines + [""])


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu", help="cpu (interpreter, custom resource) or cuda (num_gpus=1 per task)")
    ap.add_argument("--workers", default="1,2,4", help="worker counts to run, comma-separated")
    ap.add_argument("--targets", nargs="+", default=list(TARGETS))
    ap.add_argument("--shapes", type=int, default=None, help="--shapes for every run (the CPU grid's first N shapes; default 1 on the CPU, all on a GPU)")
    ap.add_argument("--plan-only", action="store_true",
                    help="only make the targets' plans (caching their query embeddings in the index: PATTERNS_INDEX_DIR), for a machine without the model")
    ap.add_argument("--max-steps", type=int, default=5)
    ap.add_argument("--out", type=Path, help="folder for bench.json and bench.md")
    args = ap.parse_args(argv)
    if args.shapes is None and args.device == "cpu":
        args.shapes = 1
    if args.plan_only:
        plan_only(args)
        return
    if args.out is None:
        ap.error("--out is required")
    if args.device == "cpu":
        os.environ["TRITON_INTERPRET"] = "1"
    from patterns.agent.loop import prepare_device

    prepare_device(args.device)
    machine = {"cpus": os.cpu_count(), "loadavg": list(os.getloadavg()), "python": sys.version.split()[0]}
    if args.device.startswith("cuda"):
        import torch

        machine["gpu"] = torch.cuda.get_device_name(0)
    record = {"device": args.device, "targets": args.targets, "shapes": args.shapes, "max_steps": args.max_steps, "machine": machine,
              "command": "python -m patterns.agent.fanout_bench " + " ".join(argv if argv is not None else sys.argv[1:]),
              "validations": None, "plain": None, "ray": []}
    args.out.mkdir(parents=True, exist_ok=True)

    def write() -> None:  # after every configuration: a run stopped from outside keeps what it measured
        files.write_atomic(args.out / "bench.json", (json.dumps(record, indent=2) + "\n").encode())
        files.write_atomic(args.out / "bench.md", render(record).encode())

    with tempfile.TemporaryDirectory(prefix="fanout-bench-", dir="/tmp") as tmp:
        root = Path(tmp)
        targets = _targets(root, args.targets)
        record["plain"] = plain_run(targets, args, root)
        record["validations"] = record["plain"]["validations"]
        print(f"plain: {record['plain']['wall_s']} s, {record['validations']} validations", flush=True)
        write()
        for n in (int(x) for x in args.workers.split(",")):
            record["ray"].append(ray_run(targets, args, root, n))
            print(f"ray, {n} workers: {record['ray'][-1]['wall_s']} s, {record['ray'][-1]['tasks']} tasks", flush=True)
            write()
    print(render(record))


if __name__ == "__main__":
    main()
