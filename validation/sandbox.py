"""Where implementations run for the gate: a child process (candidates), or this one (trusted code).

The gate (gate.py) makes inputs, runs the reference, compares and decides in
its own process; a candidate's code only ever runs in a `Child`
(validation/child.py): a fresh Python started for one validation, in a
scratch folder that is also its HOME, TMPDIR and Triton cache, with no proxy
settings and no PATTERNS_* variables, stdout and stderr in a log file, an
address-space cap on the CPU, a file-size cap, and the parent's own limits:

- every request has a wall-clock limit (the op's `call_timeout_s`, never past
  what is left of the validation's `timeout_s`); past it the child's process
  group is killed and the validation is rejected with the reason;
- its resident memory is watched while the parent waits; past the cap it is killed;
- a child that exits (SystemExit, os._exit, a crash) or answers with something
  that is not the protocol is a rejection, never a hang or an exit of the gate.

Inputs and outputs travel as files in the scratch folder; the parent reads
them with `torch.load(weights_only=True)`, which builds plain tensors and
containers only. `InProcess` has the same interface for code the project
trusts (measuring isolation's overhead, the baseline-only benchmark).
"""
from __future__ import annotations

import contextlib
import itertools
import json
import math
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from patterns.validation.monitor import Launch, Observed

CHILD = Path(__file__).with_name("child.py")
MEMORY_CAP = 16 << 30  # bytes of address space (CPU) and of resident memory (any device)
GPU_HOST_MEMORY_CAP = 96 << 30  # resident memory on a GPU host (inputs of GPU shapes pass through host memory)
FILE_CAP = 8 << 30
KEPT_ENV = (
    "PATH", "PYTHONPATH", "LD_LIBRARY_PATH", "LANG", "LC_ALL", "VIRTUAL_ENV", "CUDA_VISIBLE_DEVICES", "CUDA_HOME",
    "CUDA_PATH", "TRITON_INTERPRET", "TRITON_PTXAS_PATH", "TRITON_LIBCUDA_PATH", "HF_HUB_OFFLINE", "OMP_NUM_THREADS",
    "MKL_NUM_THREADS", "NVIDIA_VISIBLE_DEVICES", "PYTHONHASHSEED",
)


class ChildError(RuntimeError):
    """The child hung, crashed, exited or broke the protocol: `kind` names which, the message says how."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


class CallError(RuntimeError):
    """An implementation raised (in the child): the message is its exception, in one line."""


@dataclass
class Finding:
    """What the child reported while an implementation ran (see child.py)."""

    kind: str
    what: str
    role: str
    when: str = ""


@dataclass
class Limits:
    timeout_s: float = 600.0  # the whole validation
    call_timeout_s: float = 120.0  # one request (an import, a call, a timed shape)
    memory_bytes: int = MEMORY_CAP


class InProcess:
    """Trusted implementations, imported here (the project's own code only)."""

    isolated = False

    def __init__(self, device: str):
        self.device = device
        self.findings: list[Finding] = []
        self.modules: dict[str, Any] = {}

    def load(self, role: str, path: Path, module: str, launcher: str, forbidden_imports: list[str]) -> Observed:
        from patterns.core.ops import load_module
        from patterns.validation.monitor import watch

        obs = Observed()
        with watch(obs):
            mod = load_module(path, module)
        fn = getattr(mod, launcher, None)
        if not callable(fn):
            raise CallError(f"AttributeError: no launcher '{launcher}'")
        self.modules[role] = fn
        return obs

    def call(self, role: str, args: dict[str, Any], fill: float = math.nan, observe: Observed | None = None, same_tensors: bool = False) -> Any:
        from patterns.core.examples import nan_filled_empty
        from patterns.validation.monitor import watch

        from patterns.validation.monitor import name_inputs

        start = len(observe.launches) if observe is not None else 0
        with nan_filled_empty(fill):
            with watch(observe) if observe is not None else contextlib.nullcontext():
                ret = self.modules[role](**args)
                if self.device.startswith("cuda"):
                    torch.cuda.synchronize()
        if observe is not None:
            name_inputs(observe.launches[start:], args)
        return ret

    def time(self, roles: list[str], inputs: dict[str, Any], rounds: int, restored: tuple[str, ...], check_rounds: list[int]) -> dict[str, Any]:
        from patterns.validation import timing

        args = {r: {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in inputs.items()} for r in roles}
        pristine = {r: {n: args[r][n].clone() for n in restored} for r in roles}
        fns = {r: (lambda r=r: self.modules[r](**args[r])) for r in roles}
        restores = {r: (lambda r=r: [args[r][n].copy_(pristine[r][n]) for n in restored]) for r in roles} if restored else None
        samples: dict[str, dict] = {}

        def on_round(i: int, outs: dict) -> None:
            if i in check_rounds:
                for r, ret in outs.items():
                    rets = None if ret is None else tuple(ret) if isinstance(ret, (tuple, list)) else (ret,)
                    samples[f"{i}:{r}"] = {"ret": None if rets is None else tuple(x.clone() if isinstance(x, torch.Tensor) else x for x in rets),
                                           "args": {n: args[r][n].clone() for n in restored}}

        inner = timing.inner_count(fns[roles[0]], timing.flush_buffer(self.device))
        times, inners = timing.time_interleaved(fns, self.device, rounds, inner=inner, restores=restores, on_round=on_round)
        return {"times": times, "inners": inners, "samples": samples}

    def close(self) -> None:
        self.modules.clear()


class Child:
    """One child process for one validation; `findings` collects what it reported."""

    isolated = True

    def __init__(self, device: str, limits: Limits | None = None):
        self.device = device
        self.limits = limits or Limits()
        if device != "cpu" and self.limits.memory_bytes == MEMORY_CAP:
            self.limits.memory_bytes = GPU_HOST_MEMORY_CAP
        self.deadline = time.monotonic() + self.limits.timeout_s
        self.findings: list[Finding] = []
        self.dead: ChildError | None = None
        self.scratch = Path(tempfile.mkdtemp(prefix="patterns-gate-"))
        self.io = self.scratch / ".io"
        self.io.mkdir()
        self._n = itertools.count()
        self._when = ""
        req_r, self._req_w = os.pipe()
        self._rep_r, rep_w = os.pipe()
        env = {k: os.environ[k] for k in KEPT_ENV if k in os.environ}
        home = self.scratch / "home"
        home.mkdir()
        env.update(
            HOME=str(home), TMPDIR=str(self.scratch), TRITON_CACHE_DIR=str(self.scratch / "triton"),
            XDG_CACHE_HOME=str(self.scratch / "cache"), PYTHONDONTWRITEBYTECODE="1", PYTHONUNBUFFERED="1",
            PATTERNS_GATE_LIMITS=json.dumps({
                "device": device, "file_bytes": FILE_CAP,
                # CUDA reserves far more address space than it uses: only resident memory is capped there
                "memory_bytes": self.limits.memory_bytes if device == "cpu" else 0,
            }),
        )
        if device == "cpu":
            env["TRITON_INTERPRET"] = "1"
        self.log = self.scratch / "child.log"
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(
                [sys.executable, str(CHILD), str(req_r), str(rep_w), str(self.scratch)],
                cwd=self.scratch, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                pass_fds=(req_r, rep_w), start_new_session=True,
            )
        os.close(req_r)
        os.close(rep_w)
        self._buf = b""
        self._reply("start", self.limits.call_timeout_s)

    # -- the protocol ---------------------------------------------------------------
    def _kill(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=10)

    def _fail(self, kind: str, message: str) -> ChildError:
        self._kill()
        self.dead = ChildError(kind, message)
        return self.dead

    def _rss(self) -> int:
        with contextlib.suppress(OSError, ValueError):
            for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        return 0

    def _last_log_line(self) -> str:
        with contextlib.suppress(OSError):
            lines = [ln for ln in self.log.read_text(errors="replace").splitlines() if ln.strip()]
            return lines[-1][:200] if lines else ""
        return ""

    def _reply(self, what: str, limit: float) -> dict:
        """Read lines until the reply to the request in flight; findings on the way are kept."""
        limit = max(0.0, min(limit, self.deadline - time.monotonic()))
        until = time.monotonic() + limit
        while True:
            while b"\n" in self._buf:
                line, self._buf = self._buf.split(b"\n", 1)
                try:
                    msg = json.loads(line)
                    if not isinstance(msg, dict):
                        raise ValueError("not an object")
                except ValueError:
                    raise self._fail("protocol", f"the child wrote something that is not the gate's protocol ({line[:80]!r}) during {what}") from None
                if "finding" in msg:
                    self.findings.append(Finding(str(msg["finding"]), str(msg.get("what", "")), str(msg.get("role", "")), self._when))
                elif "reply" in msg and isinstance(msg["reply"], dict):
                    return msg["reply"]
                else:
                    raise self._fail("protocol", f"the child wrote an unknown message during {what}")
            now = time.monotonic()
            if now >= until:
                whole = self.deadline - now <= 0
                raise self._fail(
                    "timeout",
                    f"no answer within {limit:.0f} s during {what} (the validation's limit of {self.limits.timeout_s:.0f} s)" if whole
                    else f"no answer within {limit:.0f} s during {what} (hangs: the per-call limit)",
                )
            ready, _, _ = select.select([self._rep_r], [], [], min(0.25, until - now))
            if ready:
                chunk = os.read(self._rep_r, 1 << 20)
                if not chunk:
                    code = self.proc.wait()
                    how = f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"
                    tail = self._last_log_line()
                    raise self._fail("exit" if code >= 0 else "crash", f"the child {how} during {what}" + (f" ({tail})" if tail and code != 0 else ""))
                self._buf += chunk
            if self._rss() > self.limits.memory_bytes:
                raise self._fail("memory", f"the child exceeded the memory cap of {self.limits.memory_bytes >> 30} GiB during {what}")

    def request(self, cmd: dict, what: str, limit: float | None = None) -> dict:
        if self.dead is not None:
            raise ChildError(self.dead.kind, f"not run: {self.dead}")
        self._when = what
        try:
            os.write(self._req_w, (json.dumps(cmd) + "\n").encode())
        except OSError:
            raise self._fail("exit", f"the child is gone before {what}") from None
        reply = self._reply(what, self.limits.call_timeout_s if limit is None else limit)
        if not reply.get("ok", False):
            raise CallError(str(reply.get("error", "failed")))
        return reply

    def _file(self, tag: str) -> str:
        return str(self.io / f"{next(self._n)}-{tag}.pt")

    # -- what the gate asks -----------------------------------------------------------
    def load(self, role: str, path: Path, module: str, launcher: str, forbidden_imports: list[str]) -> Observed:
        reply = self.request(
            {"cmd": "load", "role": role, "path": str(Path(path).resolve()), "module": module, "launcher": launcher, "forbidden_imports": forbidden_imports},
            f"the {role}'s import",
        )
        return _observed(reply.get("observed"))

    def call(self, role: str, args: dict[str, Any], fill: float = math.nan, observe: Observed | None = None, same_tensors: bool = False) -> Any:
        src, dst = self._file("in"), self._file("out")
        torch.save(args, src)
        reply = self.request(
            {"cmd": "call", "role": role, "inputs": src, "out": dst, "fill": None if math.isnan(fill) else fill, "watch": observe is not None,
             "same_tensors": same_tensors},
            f"a call of the {role}",
        )
        data = _load(dst)
        os.unlink(src)
        os.unlink(dst)
        if observe is not None:
            _merge(observe, _observed(reply.get("observed")))
        after = data.get("args", {}) if isinstance(data, dict) else {}
        for name, value in args.items():  # the caller's tensors as the call left them: in-place updates land here
            if isinstance(value, torch.Tensor):
                got = after.get(name)
                if not isinstance(got, torch.Tensor) or got.shape != value.shape or got.dtype != value.dtype:
                    raise CallError(f"input {name} changed shape or dtype in the call")
                value.copy_(got)
        ret = data.get("ret") if isinstance(data, dict) else None
        if ret is None:
            return None
        return ret[0] if len(ret) == 1 else ret

    def time(self, roles: list[str], inputs: dict[str, Any], rounds: int, restored: tuple[str, ...], check_rounds: list[int]) -> dict[str, Any]:
        src, dst = self._file("in"), self._file("times")
        torch.save(inputs, src)
        self.request(
            {"cmd": "time", "roles": roles, "inputs": src, "out": dst, "rounds": rounds, "restored": list(restored), "check_rounds": check_rounds},
            "the timed runs",
            limit=max(self.limits.call_timeout_s, 300.0),
        )
        data = _load(dst)
        os.unlink(src)
        os.unlink(dst)
        return data

    def close(self) -> None:
        if self.dead is None and self.proc.poll() is None:
            with contextlib.suppress(OSError):
                os.write(self._req_w, b'{"cmd": "exit"}\n')
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=5)
        self._kill()
        for fd in (self._req_w, self._rep_r):
            with contextlib.suppress(OSError):
                os.close(fd)
        shutil.rmtree(self.scratch, ignore_errors=True)


def _load(path: str) -> Any:
    """What the child wrote: plain tensors and containers only (weights_only builds nothing else)."""
    try:
        data = torch.load(path, weights_only=True)
    except Exception as e:  # noqa: BLE001 - whatever the child wrote, it is its failure
        raise CallError(f"returned something that is not plain tensors ({type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''})") from None
    for value in _leaves(data):
        if isinstance(value, torch.Tensor) and type(value) is not torch.Tensor:
            raise CallError(f"returned a {type(value).__qualname__}, not a torch.Tensor")
    return data


def _leaves(x: Any):
    if isinstance(x, dict):
        for v in x.values():
            yield from _leaves(v)
    elif isinstance(x, (list, tuple)):
        for v in x:
            yield from _leaves(v)
    else:
        yield x


def _observed(d: Any) -> Observed:
    obs = Observed()
    if not isinstance(d, dict):
        return obs
    for launch in d.get("launches", []):
        obs.launches.append(Launch(str(launch.get("kernel", "?")), dict(launch.get("args", {})), dict(launch.get("resources", {})), inputs=list(launch.get("inputs", []))))
    obs.torch_calls.update(d.get("torch_calls", {}))
    obs.aten_calls.update(d.get("aten_calls", {}))
    obs.threads += list(d.get("threads", []))
    obs.streams += list(d.get("streams", []))
    obs.patched += list(d.get("patched", []))
    obs.calls = int(d.get("calls", 0))
    return obs


def _merge(into: Observed, new: Observed) -> None:
    into.launches += new.launches
    into.torch_calls.update(new.torch_calls)
    into.aten_calls.update(new.aten_calls)
    into.threads += new.threads
    into.streams += new.streams
    into.patched += new.patched
    into.calls += new.calls
