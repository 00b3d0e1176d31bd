"""Watching an implementation while it runs (and while it is imported).

`watch(obs)` records, into one `Observed`:
- every Triton kernel launch with its scalar and constexpr arguments (and, on a
  GPU, the compiled kernel's registers and shared memory);
- every torch function called *outside* a kernel launch (the interpreter's own
  tensor copies happen inside a launch and are not the candidate's), and every
  aten op that reached torch's dispatcher without passing torch-function
  dispatch (compute hidden under `torch._C.DisableTorchFunction`);
- which tensors each launch was given (their storages), so the gate can tell a
  kernel that reads the op's inputs from one that only copies a result;
- threads and processes started, CUDA streams created;
- timers, benchmark hooks and allocators replaced (and puts the originals
  back, so a cheating candidate cannot skew what is measured after it).
On a machine without CUDA, stream constructors are replaced by inert stand-ins
so a candidate that creates one still runs and is reported rather than crashing.
"""
from __future__ import annotations

import contextlib
import sys
import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterator

import torch
from torch.overrides import TorchFunctionMode, resolve_name
from torch.utils._python_dispatch import TorchDispatchMode

_state = threading.local()
UNTRUSTED: set[str] = set()  # files of implementations under test (their frames count even inside a launch)


@dataclass
class Launch:
    kernel: str
    args: dict[str, Any]
    resources: dict[str, int] = field(default_factory=dict)
    ptrs: set[int] = field(default_factory=set)  # storages of the tensors it was given
    inputs: list[str] = field(default_factory=list)  # the op's inputs among them (named by the caller)


@dataclass
class Observed:
    launches: list[Launch] = field(default_factory=list)
    torch_calls: Counter = field(default_factory=Counter)
    aten_calls: Counter = field(default_factory=Counter)  # reached the dispatcher without torch-function dispatch
    threads: list[str] = field(default_factory=list)
    streams: list[str] = field(default_factory=list)
    patched: list[str] = field(default_factory=list)
    calls: int = 0  # watched calls, to compare per-call counts with the baseline's


def _name(func) -> str:
    name = resolve_name(func)
    if name:
        return name
    bare = getattr(func, "__name__", repr(func))
    return f"torch.{bare}" if getattr(torch, bare, None) is not None else bare


def _in_kernel() -> bool:
    return getattr(_state, "depth", 0) > 0


class _TorchCalls(TorchFunctionMode):
    def __init__(self, obs: Observed):
        super().__init__()
        self.obs = obs

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if not _in_kernel():
            self.obs.torch_calls[_name(func)] += 1
        elif UNTRUSTED and sys._getframe(1).f_code.co_filename in UNTRUSTED:
            # the implementation's own code inside a launch (a grid callable): its torch calls count
            self.obs.torch_calls[_name(func)] += 1
        _state.seen = getattr(_state, "seen", 0) + 1
        try:
            return func(*args, **(kwargs or {}))
        finally:
            _state.seen -= 1


class _AtenCalls(TorchDispatchMode):
    """Aten ops that did not come through torch-function dispatch (which _TorchCalls sees)."""

    def __init__(self, obs: Observed):
        super().__init__()
        self.obs = obs

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if not _in_kernel() and not getattr(_state, "seen", 0):
            self.obs.aten_calls[str(func.overloadpacket.__name__)] += 1
        return func(*args, **(kwargs or {}))


def _launch_classes() -> list[type]:
    from triton.runtime.jit import JITFunction

    classes: list[type] = [JITFunction]
    try:
        from triton.runtime.interpreter import InterpretedFunction

        classes.append(InterpretedFunction)
    except ImportError:  # pragma: no cover - older triton
        pass
    return classes


def _recording_run(original, obs: Observed):
    def run(self, *args, grid=None, warmup=False, **kwargs):
        if warmup:
            return original(self, *args, grid=grid, warmup=warmup, **kwargs)
        bound = dict(zip(getattr(self, "arg_names", []), args), **kwargs)
        scalars = {k: v for k, v in bound.items() if isinstance(v, (bool, int, float, str))}
        launch = Launch(getattr(self, "__name__", type(self).__name__), scalars)
        obs.launches.append(launch)
        _state.depth = getattr(_state, "depth", 0) + 1
        launch.ptrs = {v.untyped_storage().data_ptr() for v in bound.values() if isinstance(v, torch.Tensor)}
        try:
            ret = original(self, *args, grid=grid, warmup=warmup, **kwargs)
        finally:
            _state.depth -= 1
        # a compiled GPU kernel knows its registers per thread and shared memory
        if getattr(ret, "n_regs", None) is not None:
            launch.resources["registers"] = int(ret.n_regs)
        shared = getattr(getattr(ret, "metadata", None), "shared", None)
        if shared is not None:
            launch.resources["shared_memory_bytes"] = int(shared)
        return ret

    return run


class _InertStream:
    """What `torch.cuda.Stream()` returns on a machine without CUDA while watched."""

    def __init__(self, *a, **k):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def wait_stream(self, *a, **k):
        pass

    def wait_event(self, *a, **k):
        pass

    def record_event(self, *a, **k):
        return None

    def synchronize(self):
        pass

    def query(self):
        return True


def _guarded() -> list[tuple[Any, str, str]]:
    """Timers, benchmark hooks and allocators a candidate must leave alone."""
    import time

    import triton.testing

    targets = [(time, n, f"time.{n}") for n in ("perf_counter", "perf_counter_ns", "time", "time_ns", "monotonic", "monotonic_ns", "process_time")]
    targets += [(torch.cuda, n, f"torch.cuda.{n}") for n in ("Event", "synchronize", "graph", "CUDAGraph")]
    targets += [(torch.cuda.Event, n, f"torch.cuda.Event.{n}") for n in ("elapsed_time", "record", "synchronize")]
    targets += [(torch.cuda.CUDAGraph, "replay", "torch.cuda.CUDAGraph.replay")]
    targets += [(triton.testing, n, f"triton.testing.{n}") for n in ("do_bench", "do_bench_cudagraph")]
    # the NaN poisoning of outputs goes through these
    targets += [(torch, n, f"torch.{n}") for n in ("empty", "empty_like", "empty_strided")]
    targets += [(torch.Tensor, "new_empty", "torch.Tensor.new_empty")]
    return [(obj, name, label) for obj, name, label in targets if hasattr(obj, name)]


def name_inputs(launches: list[Launch], args: dict[str, Any]) -> None:
    """Name, in each launch, the op's inputs whose storage it was given."""
    for launch in launches:
        launch.inputs = [n for n, t in args.items() if isinstance(t, torch.Tensor) and t.untyped_storage().data_ptr() in launch.ptrs]


Snapshot = list[tuple[Any, str, str, Any]]


def snapshot() -> Snapshot:
    return [(obj, name, label, getattr(obj, name)) for obj, name, label in _guarded()]


def restore(snap: Snapshot) -> list[str]:
    """Put back whatever changed since `snap`; name what had changed."""
    changed = []
    for obj, name, label, original in snap:
        if getattr(obj, name) is not original:
            changed.append(label)
            setattr(obj, name, original)
    return changed


@contextlib.contextmanager
def watch(obs: Observed) -> Iterator[Observed]:
    import _thread
    import multiprocessing.process

    patches: list[tuple[Any, str, Any]] = []
    missing = object()

    def patch(obj: Any, name: str, value: Any) -> None:
        # a class attribute is restored from the class's own dict (or removed if inherited)
        patches.append((obj, name, obj.__dict__.get(name, missing) if isinstance(obj, type) else getattr(obj, name)))
        setattr(obj, name, value)

    for cls in _launch_classes():
        patch(cls, "run", _recording_run(cls.run, obs))

    def started(kind: str, original):
        def start(*a, **k):
            obs.threads.append(kind)
            return original(*a, **k)

        return start

    patch(threading.Thread, "start", started("threading.Thread.start", threading.Thread.start))
    patch(_thread, "start_new_thread", started("_thread.start_new_thread", _thread.start_new_thread))
    patch(multiprocessing.process.BaseProcess, "start", started("multiprocessing Process.start", multiprocessing.process.BaseProcess.start))

    # streams are counted in the classes' __new__, so the classes stay themselves for isinstance
    cuda = torch.cuda.is_available()

    def stream_new(cls: type, kind: str):
        original = cls.__new__

        def new(klass, *a, **k):
            # torch makes Stream objects itself (current_stream()): only the candidate's count
            if not sys._getframe(1).f_globals.get("__name__", "").startswith("torch"):
                obs.streams.append(kind)
            return original(klass, *a, **k) if cuda else _InertStream()

        return staticmethod(new)

    for cls, kind in ((torch.cuda.Stream, "torch.cuda.Stream"), (torch.cuda.ExternalStream, "torch.cuda.ExternalStream")):
        patch(cls, "__new__", stream_new(cls, kind))
    if not cuda:
        patch(torch.cuda, "stream", lambda s=None: contextlib.nullcontext())

    obs.calls += 1
    guarded = snapshot()
    try:
        with _TorchCalls(obs), _AtenCalls(obs):
            yield obs
    finally:
        obs.patched += restore(guarded)
        for obj, name, original in reversed(patches):
            if original is missing:
                delattr(obj, name)
            else:
                setattr(obj, name, original)
