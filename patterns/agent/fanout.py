"""The agent's validations fanned out over a Ray cluster: one Ray task per candidate, the journal kept here.

    patterns agent kda_decode matmul kernels/rmsnorm_gate --ray 10.0.0.1:6379

This process (the driver) runs every target's loop (`Agent.steps`) side by side
and keeps every journal; only the gate runs elsewhere. Each validation the loops
ask for becomes a Ray task (`_gate_task`) that asks for one GPU (`num_gpus=1`),
or, with `--ray-resource NAME=N`, N units of a custom resource (a CPU-only
cluster started with `--resources '{"NAME": ...}'`). A task runs the gate in a
fresh worker process (`max_calls=1`: nothing a candidate did survives into the
next task) with the gate's own limits, and returns the evidence bundle; the
driver writes it into the target's run folder and journals it. So:

- **One writer.** Workers write nothing the run keeps: bundles, journal events
  and review items are written here, in the order results arrive, each
  `validated` exactly once per candidate (`validated` is keyed by the attempt's
  key and the candidate's sha256).
- **No idle worker while work remains.** Every loop's next validation is
  submitted first; free slots (the cluster's units of the resource a task asks
  for) are then filled from each loop's lookahead (`Agent.lookahead`: planned
  rewrites still queued), round-robin over the targets. The loop still takes
  each outcome in its own order, so the attempts, verdicts and review items are
  those of the plain run; a lookahead result the loop never reaches (a merge or
  --max-steps ended it) stays in the journal as `validated` only, and tasks
  still running when a target's run ends are cancelled.
- **Faults.** A worker that dies mid-validation (killed, out of memory, node
  lost) is journaled as `retry` and the task submitted again, at most
  `RETRIES` times; after that the attempt is `invalid` at layer "worker". A
  driver killed and restarted resumes every target's run from its journal
  (`patterns.agent.loop`): `validated` outcomes are taken from the journal, so
  nothing validated runs again; tasks in flight died with the driver's job and
  are submitted again.
- **Several hosts.** A task carries the candidate's and the target's source, and
  a worker that lacks those files (another host, no shared filesystem) writes
  them into a scratch folder and maps the bundle's paths back; the op itself
  (a built-in op, or a spec path) must resolve on every host.

Ray is imported only here, and this module only for `--ray`.
"""
from __future__ import annotations

import os
import re
import socket
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from patterns.agent.loop import Agent, AgentError, GateCall, GateOutcome, RunResult
from patterns.core import files

RETRIES = 2  # a task whose worker died is submitted again this many times
ADDRESS = re.compile(r"^(ray://)?[A-Za-z0-9_.\-\[\]:]+:\d+$")


class FanoutError(AgentError):
    """Ray missing or unreachable, a bad --ray-resource: one line, CLI exit 2."""


# --------------------------------------------------------------------------------------
# the cluster
# --------------------------------------------------------------------------------------


def _ray():
    try:
        import ray
    except ImportError:
        raise FanoutError("--ray: Ray is not installed: pip install 'patterns[ray]'") from None
    return ray


def parse_resource(text: str | None) -> tuple[str, float] | None:
    """`NAME=N` (`validator=1`) -> ("validator", 1.0)."""
    if text is None:
        return None
    name, _, amount = text.partition("=")
    try:
        value = float(amount or "1")
    except ValueError:
        value = 0.0
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_\-]*", name) or value <= 0 or name in ("CPU", "GPU", "memory"):
        raise FanoutError(f"--ray-resource: expected NAME=N (a custom resource and a positive amount), got '{text}'")
    return name, value


def connect(address: str) -> None:
    """Join the cluster at ADDRESS (`host:port`, `ray://host:port`, `auto`), or start one on this host (`local`)."""
    ray = _ray()
    if ray.is_initialized():
        return
    try:
        if address == "local":
            ray.init(include_dashboard=False, log_to_driver=False)
        else:
            ray.init(address=address, log_to_driver=False)
    except Exception as exc:  # ConnectionError, Ray's AuthenticationError, a malformed address: all one line for the user
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise FanoutError(f"--ray {address}: cannot join the Ray cluster: {first}") from None


def task_options(device: str, resource: tuple[str, float] | None) -> dict[str, Any]:
    """What one validation asks the scheduler for."""
    if resource is not None:
        # the custom resource alone decides how many run at once (a CPU-only cluster's stand-in for GPUs)
        return {"num_cpus": 0, "resources": {resource[0]: resource[1]}}
    if device.startswith("cuda"):
        return {"num_cpus": 1, "num_gpus": 1}
    return {"num_cpus": 1}


def capacity(options: dict[str, Any]) -> int:
    """How many validations the cluster runs at once, now (nodes may join or leave)."""
    have = _ray().cluster_resources()
    if options.get("resources"):
        (name, need), = options["resources"].items()
    elif options.get("num_gpus"):
        name, need = "GPU", options["num_gpus"]
    else:
        name, need = "CPU", options["num_cpus"]
    return max(1, int(have.get(name, 0) // need))


def cluster_device(device: str, resource: tuple[str, float] | None = None) -> str:
    """The workers' device (the driver's host may have no GPU): `auto` is cuda where the cluster has GPUs."""
    gpus = _ray().cluster_resources().get("GPU", 0)
    if device == "auto":
        return "cuda" if gpus >= 1 else "cpu"
    if device.startswith("cuda") and gpus < 1 and resource is None:
        raise FanoutError(f"--device {device}: the Ray cluster has no GPU (or pass --ray-resource NAME=N)")
    if device not in ("cpu", "cuda") and not re.fullmatch(r"cuda:\d+", device):
        raise FanoutError(f"unknown device '{device}' (auto, cpu or cuda)")
    return "cuda" if device.startswith("cuda") else device  # a task's GPU is the one Ray gave it


# --------------------------------------------------------------------------------------
# the task (runs in a Ray worker)
# --------------------------------------------------------------------------------------


def _local(path: str, text: str, sha: str, scratch: Path) -> Path:
    """The file itself where this host has it, else a copy in the task's scratch folder."""
    p = Path(path)
    if p.is_file() and files.sha256_file(p) == sha:
        return p
    copy = scratch / files.sha256_hex(path)[:16] / p.name
    copy.parent.mkdir(parents=True, exist_ok=True)
    copy.write_text(text, encoding="utf-8")
    return copy


def gate_task(request: dict[str, Any]) -> dict[str, Any]:
    """One candidate through the gate, as the plain run does it (Agent.gate), in this worker process."""
    from patterns.agent.loop import _gate_spec, prepare_device
    from patterns.core.ops import OpError, load_spec
    from patterns.validation.gate import validate

    device = prepare_device(request["device"])  # the interpreter switched on before any kernel is imported
    worker = {"host": socket.gethostname(), "pid": os.getpid()}
    with tempfile.TemporaryDirectory(prefix="patterns-task-") as tmp:
        moved: dict[str, str] = {}  # this host's copy -> the driver's path
        try:
            if request.get("target"):  # an agent's run: its target is the gate's baseline
                target = _local(request["target"], request["target_text"], request["target_sha256"], Path(tmp))
                moved[str(target)] = request["target"]
                spec = _gate_spec(request["op"], target, request["shapes"])[0]
            else:  # `patterns validate`: the op's own baseline
                spec = load_spec(request["op"])
            candidate = None
            if request.get("candidate"):
                candidate = _local(request["candidate"], request["candidate_text"], request["sha256"], Path(tmp))
                moved[str(candidate)] = request["candidate"]
            bundle = validate(spec, candidate, device=device, max_cost=request["max_cost"], timeout=request.get("timeout"))
        except OpError as exc:
            return {"layer": "import", "reason": str(exc), "worker": worker}
    back = {k: moved[getattr(bundle, k)] for k in ("candidate", "baseline") if getattr(bundle, k) in moved}
    return {"bundle": bundle.model_copy(update=back).model_dump(mode="json"), "worker": worker}


# --------------------------------------------------------------------------------------
# the driver
# --------------------------------------------------------------------------------------


@dataclass
class _Task:
    target: int  # index into the agents
    call: GateCall
    tries: int = 1
    ahead: bool = False


@dataclass
class Fanout:
    """Several agents' loops driven together, their validations run as Ray tasks."""

    agents: list[Agent]
    resource: tuple[str, float] | None = None
    retries: int = RETRIES
    say: Callable[[str], None] = lambda _: None
    progress: Callable[[int, int], None] = lambda done, total: None
    _remote: Any = None
    _inflight: dict[Any, _Task] = field(default_factory=dict)  # ObjectRef -> task
    _waiting: dict[int, GateCall] = field(default_factory=dict)  # target -> the call its loop waits on
    _done: int = 0

    def run(self) -> list[RunResult]:
        ray = _ray()
        devices = {a.device for a in self.agents}
        if len(devices) != 1:
            raise FanoutError(f"--ray: the targets resolve to different devices ({', '.join(sorted(devices))})")
        self.options = task_options(devices.pop(), self.resource)
        # max_calls=1: a fresh worker process per validation; retries are the driver's (journaled), not Ray's
        self._remote = ray.remote(max_calls=1, max_retries=0)(gate_task).options(**self.options)
        for agent in self.agents:
            agent.ahead = True  # candidates named by content: a lookahead's file is the loop's file
        loops = [a.steps() for a in self.agents]
        results: dict[int, RunResult] = {}

        def step(i: int, outcome: GateOutcome | None) -> None:
            try:
                call = next(loops[i]) if outcome is None else loops[i].send(outcome)
            except StopIteration as stop:
                results[i] = stop.value
                self._waiting.pop(i, None)
                # the run ended (a merge, --max-steps) before using what was validated ahead: free those workers
                for ref in [r for r, t in self._inflight.items() if t.target == i]:
                    ray.cancel(ref, force=True)
                    del self._inflight[ref]
                return
            self._waiting[i] = call
            if not any(t.target == i and t.call.sha256 == call.sha256 and t.call.key == call.key for t in self._inflight.values()):
                self._submit(_Task(i, call))

        for i in range(len(loops)):
            step(i, None)
        while self._inflight:
            self._fill()
            ready, _ = ray.wait(list(self._inflight), num_returns=1)
            task = self._inflight.pop(ready[0])
            outcome = self._collect(ready[0], task)
            if outcome is None:  # submitted again
                continue
            waiting = self._waiting.get(task.target)
            if waiting is not None and (waiting.key, waiting.sha256) == (task.call.key, task.call.sha256):
                step(task.target, outcome)
        return [results[i] for i in range(len(loops))]

    # -------------------------------------------------------------- tasks
    def _request(self, task: _Task) -> dict[str, Any]:
        agent, call = self.agents[task.target], task.call
        target = agent.cfg.target
        return {
            "op": agent.cfg.op, "target": str(target), "target_text": target.read_text(encoding="utf-8"),
            "target_sha256": files.sha256_file(target), "shapes": agent.cfg.shapes, "device": agent.device,
            "candidate": str(call.candidate), "candidate_text": call.candidate.read_text(encoding="utf-8"),
            "sha256": call.sha256, "max_cost": call.max_cost,
        }

    def _submit(self, task: _Task) -> None:
        journal = self.agents[task.target].journal
        journal.append("submitted", {"key": list(task.call.key), "sha256": task.call.sha256, "candidate": str(task.call.candidate),
                                     "try": task.tries, "ahead": task.ahead})
        self._inflight[self._remote.remote(self._request(task))] = task
        self.progress(self._done, self._done + len(self._inflight))

    def _fill(self) -> None:
        """Free slots get the loops' lookahead, one target after another."""
        free = capacity(self.options) - len(self._inflight)
        if free <= 0:
            return
        busy = {(t.target, t.call.key, t.call.sha256) for t in self._inflight.values()}
        pending = []
        for i, agent in enumerate(self.agents):
            if i not in self._waiting:
                pending.append([])
                continue
            pending.append([c for c in agent.lookahead() if (i, c.key, c.sha256) not in busy and (c.key, c.sha256) not in agent.validated])
        while free > 0 and any(pending):
            for i, calls in enumerate(pending):
                if calls and free > 0:
                    self._submit(_Task(i, calls.pop(0), ahead=True))
                    free -= 1

    def _collect(self, ref, task: _Task) -> GateOutcome | None:
        """The task's outcome, written and journaled; None when it was submitted again."""
        ray = _ray()
        agent, call = self.agents[task.target], task.call
        died = (ray.exceptions.WorkerCrashedError, ray.exceptions.NodeDiedError, ray.exceptions.OutOfMemoryError,
                ray.exceptions.LocalRayletDiedError)
        try:
            value = ray.get(ref)
        except died as exc:
            reason = str(exc).strip().splitlines()[0]
            if task.tries <= self.retries:
                agent.journal.append("retry", {"key": list(call.key), "sha256": call.sha256, "try": task.tries, "reason": reason})
                self.say(f"{agent.name}: the worker validating {call.pattern_id} died ({reason}); trying again")
                self._submit(_Task(task.target, call, task.tries + 1, task.ahead))
                return None
            value = {"layer": "worker", "reason": f"the worker validating it died {task.tries} times (last: {reason})", "worker": {}}
        except ray.exceptions.RayTaskError as exc:
            raise exc.as_instanceof_cause() from None  # the gate's own error: as in the plain run
        event = {"key": list(call.key), "sha256": call.sha256, "candidate": str(call.candidate), "tries": task.tries, "worker": value["worker"]}
        if "bundle" in value:
            from patterns.core.records import EvidenceBundle
            from patterns.validation.bundle import write_bundle

            bundle = EvidenceBundle.model_validate(value["bundle"])
            path, _ = write_bundle(bundle, agent.run_dir / "evidence")
            outcome = GateOutcome(bundle=bundle, bundle_path=path)
            event["bundle"] = str(path)
        else:
            outcome = GateOutcome(layer=value["layer"], reason=value["reason"])
            event.update(layer=outcome.layer, reason=outcome.reason)
        agent.journal.append("validated", event)
        agent.validated[(call.key, call.sha256)] = outcome
        self._done += 1
        self.progress(self._done, self._done + len(self._inflight))
        return outcome


def validate_remote(op: str, candidate: Path | None, *, out: Path | None, device: str = "auto", pattern: str | None = None,
                    on_stage: Callable[[str], None] | None = None, timeout: float | None = None, address: str = "local",
                    resource: str | None = None):
    """`patterns validate ... --ray`: the gate as one Ray task; the bundle written here (run_gate's signature)."""
    from patterns.core.library import get
    from patterns.core.ops import OpError
    from patterns.core.records import EvidenceBundle
    from patterns.validation.bundle import write_bundle

    res = parse_resource(resource)
    connect(address)
    device = cluster_device(device, res)
    op = str(Path(op).resolve()) if Path(op).exists() else op  # a spec path, as every worker sees it
    request = {"op": op, "device": device, "max_cost": get(pattern).pattern.max_cost if pattern else 1.0, "timeout": timeout}
    if candidate is not None:
        if not Path(candidate).is_file():
            raise OpError(f"{candidate}: no such candidate file")
        text = Path(candidate).read_text(encoding="utf-8", errors="replace")
        request.update(candidate=str(Path(candidate).resolve()), candidate_text=text, sha256=files.sha256_hex(text))
    (on_stage or (lambda _: None))(f"a Ray task on {device}")
    remote = _ray().remote(max_calls=1, max_retries=RETRIES)(gate_task).options(**task_options(device, res))
    value = _ray().get(remote.remote(request))
    if "bundle" not in value:
        raise OpError(value["reason"])
    bundle = EvidenceBundle.model_validate(value["bundle"])
    if out is not None:
        write_bundle(bundle, out)
    return bundle


def run_targets(agents: list[Agent], address: str, resource: str | None = None, **kwargs) -> list[RunResult]:
    """`patterns agent TARGET... --ray ADDRESS`: every target's run, validations as Ray tasks."""
    res = parse_resource(resource)
    connect(address)
    return Fanout(agents, res, **kwargs).run()


__all__ = ["ADDRESS", "FanoutError", "Fanout", "RETRIES", "capacity", "cluster_device", "connect", "gate_task", "parse_resource", "run_targets", "task_options", "validate_remote"]
