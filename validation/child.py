"""The gate's child process: the only process a candidate's code runs in.

Started by sandbox.Child as `python child.py REQUEST_FD REPLY_FD SCRATCH` in a
scratch working directory (HOME, TMPDIR and Triton's cache inside it). It
imports torch, Triton and the gate's call machinery, installs an audit hook,
then serves the parent's requests one JSON line at a time: `load` an
implementation, `call` it on inputs the parent wrote to a file (outputs go back
the same way), `time` two implementations interleaved on a GPU.

It decides nothing. What it sees is reported to the parent at once, one JSON
line per finding, before the candidate can undo it:
- the audit hook: file writes outside the scratch folder, process creation,
  sockets, ctypes, reads of the gate's frames (sys._getframe, tb_frame,
  gi_frame), gc introspection, imports of the op's reference, new audit hooks;
  each is also blocked (the action raises);
- tripwires on torch's dispatch switches (torch._C.DisableTorchFunction, ...);
- a module guard: attributes of torch, Triton, builtins, timers and this
  process's own gate modules replaced (at import or during a call; put back);
- global torch state (default dtype, threads, denormals, TF32 flags, grad
  mode) changed and left changed (put back);
- outputs that are not fresh (a later call changed an earlier result) or are
  not plain tensors.
The parent treats a reply it cannot parse, a child that exits or hangs past its
limit, and every finding above as a rejection with its reason.
"""
from __future__ import annotations

import json
import os
import sys


def main(argv: list[str]) -> int:
    req_fd, rep_fd, scratch = int(argv[1]), int(argv[2]), os.path.realpath(argv[3])
    os.chdir(scratch)
    import sysconfig

    # -- the audit hook, first: nothing the candidate runs is ever outside it ------------
    state = {"armed": False, "role": "", "busy": False, "forbidden_imports": set(), "untrusted": set()}
    stdlib_roots = tuple({os.path.realpath(sysconfig.get_paths()[k]) + os.sep for k in ("stdlib", "platstdlib")})

    def in_stdlib(name: str) -> bool:
        if name.startswith("<frozen"):
            return True
        return name.startswith(stdlib_roots) and "-packages" + os.sep not in name
    # One rule for whose code a frame is (`vouched`), used by every check that asks who did
    # something (the audit hook's culprit, the dispatch tripwires): the code under test is
    # an implementation's file (state["untrusted"]) and whatever is not vouched for; the
    # gate vouches for a file that is not an implementation's and that
    #   - lies under a root of the runtime (`roots`: torch, triton, numpy, the gate's and
    #     the ops' own packages; their parts imported lazily, after a candidate, included),
    #   - or lies in a site-packages folder (an installed library, imported by a candidate),
    #   - or was imported before any implementation was loaded (`preloaded`: libraries
    #     installed outside a site-packages folder, a --target folder on PYTHONPATH as on a
    #     GPU host with carried wheels, are as trusted as those inside one).
    # Frames of the standard library are skipped, not judged: a candidate's call routed
    # through contextlib or threading is still the candidate's.
    roots: list[str] = []  # filled in once torch, triton and numpy are imported
    preloaded: set[str] = set()  # filled in just before the first request

    def vouched(name: str) -> bool:
        full = os.path.realpath(name) if not name.startswith("<") else name
        if full in state["untrusted"]:
            return False
        return full.startswith(tuple(roots)) or "-packages" + os.sep in full or full in preloaded

    def caller_outside_stdlib(depth: int):
        """The innermost frame, `depth` frames out from the caller, that is not the standard library's."""
        f = sys._getframe(depth + 1)
        while f is not None and in_stdlib(f.f_code.co_filename):
            f = f.f_back
        return f
    write = os.write  # bound now: a candidate replacing os.write changes nothing here
    dumps = json.dumps

    def report(kind: str, what: str) -> None:
        line = dumps({"finding": kind, "what": what, "role": state["role"]}) + "\n"
        try:
            write(rep_fd, line.encode())
        except OSError:
            pass

    def culprit() -> str:
        """The innermost frame outside the standard library, as "file:line", when it is the code
        under test (an implementation's file, what it imported from outside the installed
        libraries, code it compiled); '' when it is an installed library's or the gate's own."""
        f = caller_outside_stdlib(2)
        if f is None or vouched(f.f_code.co_filename):
            return ""
        return f"{os.path.basename(f.f_code.co_filename)}:{f.f_lineno}"

    def by_triton() -> bool:
        f = sys._getframe(2)
        while f is not None:
            name = f.f_code.co_filename
            if not in_stdlib(name):
                return "/triton/" in name
            f = f.f_back
        return False

    # Standard-library code that reads a frame for its own bookkeeping and hands back no
    # frame: typing.TypeVar/NamedTuple and enum (the caller's module name), warnings
    # (stacklevel), logging's findCaller. Widely used libraries (FLA, SGLang) define
    # TypeVars at import; counting those as frame access rejects honest code. The
    # functions that return frames to their caller (inspect.currentframe/stack,
    # traceback.walk_stack, logging.currentframe, a lambda) still count.
    FRAME_GIVERS = {"currentframe", "stack", "getouterframes", "getinnerframes", "trace", "walk_stack",
                    "extract_stack", "format_stack", "print_stack", "<lambda>"}

    def stdlib_bookkeeping(caller) -> bool:
        return in_stdlib(caller.f_code.co_filename) and caller.f_code.co_name not in FRAME_GIVERS

    WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
    PROCESS = ("os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork", "os.forkpty", "subprocess.Popen", "pty.spawn")
    PATH_WRITES = ("os.remove", "os.rename", "os.rmdir", "os.mkdir", "os.symlink", "os.link", "os.truncate", "os.chmod", "os.chown", "shutil.rmtree", "shutil.move", "shutil.copyfile", "os.utime")

    def outside(path) -> bool:
        if isinstance(path, int):
            return False
        if isinstance(path, bytes):
            path = path.decode(errors="replace")
        full = os.path.realpath(os.fspath(path))
        return not (full == scratch or full.startswith(scratch + os.sep) or full == "/dev/null")

    def hook(event: str, args: tuple) -> None:
        if not state["armed"] or state["busy"]:
            return
        state["busy"] = True
        try:
            finding = None
            if event == "open" and len(args) >= 3:
                path, mode, flags = args[0], args[1] or "", args[2] or 0
                if (any(c in str(mode) for c in "wax+") or flags & WRITE_FLAGS) and outside(path):
                    finding = ("file write", f"writes {os.fspath(path)!s} (outside its scratch folder)")
            elif event in PATH_WRITES and args and outside(args[0]):
                finding = ("file write", f"{event} on {os.fspath(args[0])!s} (outside its scratch folder)")
            elif event.startswith(PROCESS):
                if not by_triton():
                    finding = ("process", f"starts a process ({event}: {str(args[:2])[:120]})")
            elif event.startswith("socket."):
                finding = ("network", f"opens a socket ({event})")
            elif event == "sys.addaudithook":
                # an installed library may add its own hook at import (filelock >= 3.20 on Python
                # 3.12+ does, and torch and FLA import filelock); one the code under test adds counts
                who = culprit()
                finding = ("audit hook", f"installs an audit hook ({who})") if who else None
            elif event in ("os.kill", "os.killpg", "signal.pthread_kill"):
                finding = ("process", f"sends a signal ({event})")
            elif event in ("os.putenv", "os.unsetenv"):
                who = culprit()
                finding = ("environment", f"changes the environment ({event}: {str(args[:1])[:80]}, {who})") if who else None
            else:
                who = None
                if event.startswith("ctypes."):
                    who = culprit()
                    finding = ("ctypes", f"uses ctypes ({event}, {who})") if who else None
                elif (event in ("sys._getframe", "sys._current_frames") and not stdlib_bookkeeping(sys._getframe(1))) or (event == "object.__getattr__" and len(args) > 1 and args[1] in ("tb_frame", "gi_frame", "cr_frame", "ag_frame", "f_back")):
                    who = culprit()
                    finding = ("frame access", f"reads the caller's frames ({event if event != 'object.__getattr__' else args[1]}, {who})") if who else None
                elif event in ("gc.get_objects", "gc.get_referrers", "gc.get_referents"):
                    who = culprit()
                    finding = ("introspection", f"searches the process's objects ({event}, {who})") if who else None
                elif event == "import" and args and args[0] in state["forbidden_imports"]:
                    who = culprit()
                    finding = ("reference", f"imports {args[0]} (the op's reference or spec, or the gate; {who})") if who else None
                elif event == "object.__setattr__" and len(args) > 1 and args[1] in ("__code__", "__globals__", "__defaults__", "__kwdefaults__", "__closure__") \
                        and not stdlib_bookkeeping(sys._getframe(1)):  # namedtuple sets its new __new__'s defaults (a NamedTuple with defaults)
                    who = culprit()
                    finding = ("patching", f"replaces {getattr(args[0], '__qualname__', '?')}.{args[1]}") if who else None
            if finding:
                report(*finding)
                raise PermissionError(f"blocked by the validation gate: {finding[1]}")
        finally:
            state["busy"] = False

    sys.addaudithook(hook)

    # -- the gate's machinery, imported before any candidate --------------------------
    import resource

    limits = json.loads(os.environ.get("PATTERNS_GATE_LIMITS", "{}"))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if limits.get("memory_bytes"):
        cap = int(limits["memory_bytes"])
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    if limits.get("file_bytes"):
        resource.setrlimit(resource.RLIMIT_FSIZE, (int(limits["file_bytes"]),) * 2)

    import contextlib
    import math
    import time
    import types

    import numpy
    import torch
    import torch._dynamo  # noqa: F401 - imported lazily otherwise, and it rewraps torch functions (torch.manual_seed)
    import triton

    device = limits.get("device", "cpu")
    if device.startswith("cuda"):
        # CUDA's lazy initialisation replaces public state (torch.cuda.default_generators) besides
        # private flags: done here, before the module guard's snapshot, so a library that touches the
        # device at import (FLA reads its capability) patches nothing; caches filled later
        # (_cached_device_count) are lazily_filled's
        torch.cuda.init()
    from patterns.core import interpreter

    if device == "cpu":
        interpreter.install_cpu_shims()
    from patterns.core.examples import nan_filled_empty
    from patterns.core.ops import kernels_dir, load_module
    from patterns.validation import monitor, timing

    for mod in (torch, triton, numpy):
        roots.append(os.path.realpath(os.path.dirname(mod.__file__)) + os.sep)
    roots.append(os.path.realpath(os.path.dirname(monitor.__file__)) + os.sep)
    roots.append(os.path.realpath(os.path.dirname(interpreter.__file__)) + os.sep)
    roots.append(os.path.realpath(kernels_dir()) + os.sep)  # the ops' own packages (a candidate file is named untrusted)
    Observed, watch = monitor.Observed, monitor.watch
    tload, tsave = torch.load, torch.save
    Tensor = torch.Tensor
    # what serving has loaded too: the gate's own modules are not listed where a candidate looks
    for name in [n for n in sys.modules if n.startswith("patterns.validation")]:
        del sys.modules[name]

    def guarded_modules() -> dict[str, object]:
        import triton.language
        import triton.runtime.jit
        import triton.testing

        found = {
            "torch": torch, "torch.Tensor": torch.Tensor, "torch.nn.functional": torch.nn.functional,
            "torch.cuda": torch.cuda, "torch.cuda.Event": torch.cuda.Event, "torch.cuda.CUDAGraph": torch.cuda.CUDAGraph,
            "torch.overrides": torch.overrides, "torch._C": torch._C, "triton": triton, "triton.language": triton.language,
            "triton.testing": triton.testing, "triton.runtime.jit.JITFunction": triton.runtime.jit.JITFunction,
            "builtins": __builtins__ if isinstance(__builtins__, types.ModuleType) else sys.modules["builtins"],
            "time": time, "math": math, "os": os, "json": json, "numpy": numpy,
            "patterns.validation.monitor": monitor, "patterns.validation.timing": timing,
            "patterns.core.examples": sys.modules["patterns.core.examples"], "patterns.core.ops": sys.modules["patterns.core.ops"],
            "monitor._TorchCalls": monitor._TorchCalls,
        }
        with contextlib.suppress(ImportError):
            from triton.runtime.interpreter import InterpretedFunction

            found["triton.runtime.interpreter.InterpretedFunction"] = InterpretedFunction
        return found

    GUARDED = guarded_modules()
    VOLATILE = {"__warningregistry__", "_last_launch", "__loader__"}

    def module_snapshot() -> dict[str, dict[str, object]]:
        return {label: dict(vars(obj)) for label, obj in GUARDED.items()}

    def lazily_filled(label: str, key: str, new: object, old: object = None, added: bool = False) -> bool:
        """torch's and Triton's own state, filled as they are used: a submodule imported lazily, a
        private name of torch, torch.cuda or triton added, or a private value of theirs set (CUDA's
        lazy init sets torch.cuda._initialized, device_count() fills _cached_device_count: FLA reads
        the device at import). A private function, class or module replaced still counts, as does
        any public attribute."""
        private = label in ("torch", "torch.cuda", "triton") and key.startswith("_")
        if added:
            return isinstance(new, types.ModuleType) or private
        return private and not callable(old) and not callable(new) and not isinstance(new, types.ModuleType)

    def check_modules(snap: dict[str, dict[str, object]], when: str) -> None:
        """Report and undo what changed in the guarded modules since `snap`."""
        for label, before in snap.items():
            obj = GUARDED[label]
            now = vars(obj)
            for key, value in before.items():
                if key in VOLATILE:
                    continue
                if key in now and now[key] is not value and lazily_filled(label, key, now[key], value):
                    continue
                if key not in now or now[key] is not value:
                    report("patching", f"patches {label}.{key} ({when})")
                    with contextlib.suppress(Exception):
                        setattr(obj, key, value)
            for key in [k for k in now if k not in before and k not in VOLATILE]:
                if lazily_filled(label, key, now[key], added=True):
                    continue
                report("patching", f"adds {label}.{key} ({when})")
                with contextlib.suppress(Exception):
                    delattr(obj, key)

    # -- tripwires on the switches that hide torch compute from the monitor ---------------
    def tripwire(owner: object, name: str, label: str) -> None:
        original = getattr(owner, name, None)
        if original is None:
            return

        def wired(*a, **k):
            f = caller_outside_stdlib(1)
            if f is not None and not vouched(f.f_code.co_filename):
                state["busy"] = True
                report("dispatch toggle", f"switches off torch dispatch ({label})")
                state["busy"] = False
            return original(*a, **k)

        setattr(owner, name, wired)

    import torch.utils._python_dispatch as python_dispatch

    for owner, name, label in (
        (torch._C, "DisableTorchFunction", "torch._C.DisableTorchFunction"),
        (torch._C, "DisableTorchFunctionSubclass", "torch._C.DisableTorchFunctionSubclass"),
        (torch._C, "_DisableTorchDispatch", "torch._C._DisableTorchDispatch"),
        (torch._C, "_pop_torch_function_stack", "torch._C._pop_torch_function_stack"),
        (torch._C, "_pop_torch_dispatch_stack", "torch._C._pop_torch_dispatch_stack"),
        (torch._C, "_set_torch_function_mode", "torch._C._set_torch_function_mode"),
        (python_dispatch, "_disable_current_modes", "torch.utils._python_dispatch._disable_current_modes"),
        (torch._C, "_set_dispatch_mode", "torch._C._set_dispatch_mode"),
    ):
        tripwire(owner, name, label)

    # -- global torch state ------------------------------------------------------------
    def flushes_denormals() -> bool:
        with torch._C.DisableTorchFunction():
            return bool((torch.tensor([1e-40], dtype=torch.float32) * 1.0)[0] == 0)

    def global_state() -> dict[str, object]:
        cuda = torch.backends.cuda.matmul
        return {
            "default dtype": str(torch.get_default_dtype()), "threads": torch.get_num_threads(),
            "grad mode": torch.is_grad_enabled(), "float32 matmul precision": torch.get_float32_matmul_precision(),
            "cuda matmul allow_tf32": cuda.allow_tf32, "cudnn allow_tf32": torch.backends.cudnn.allow_tf32,
            "bf16 reduced-precision reduction": cuda.allow_bf16_reduced_precision_reduction,
            "fp16 reduced-precision reduction": cuda.allow_fp16_reduced_precision_reduction,
            "deterministic algorithms": torch.are_deterministic_algorithms_enabled(),
            "flush denormals": flushes_denormals(),
            "torch function modes": torch._C._len_torch_function_stack(),
        }

    def restore_state(s: dict[str, object]) -> None:
        torch.set_default_dtype(getattr(torch, str(s["default dtype"]).removeprefix("torch.")))
        torch.set_num_threads(int(s["threads"]))
        torch.set_grad_enabled(bool(s["grad mode"]))
        torch.set_float32_matmul_precision(str(s["float32 matmul precision"]))
        torch.backends.cuda.matmul.allow_tf32 = bool(s["cuda matmul allow_tf32"])
        torch.backends.cudnn.allow_tf32 = bool(s["cudnn allow_tf32"])
        torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = bool(s["bf16 reduced-precision reduction"])
        torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = bool(s["fp16 reduced-precision reduction"])
        torch.use_deterministic_algorithms(bool(s["deterministic algorithms"]))
        torch.set_flush_denormal(bool(s["flush denormals"]))

    def check_state(when: str) -> None:
        now = global_state()
        changed = [f"{k} {BASE_STATE[k]} -> {v}" for k, v in now.items() if v != BASE_STATE[k]]
        if changed:
            report("global state", f"changes global torch state and leaves it changed ({'; '.join(changed)}; {when})")
            restore_state(BASE_STATE)

    torch.set_grad_enabled(False)  # as in serving: inference only
    BASE_STATE = global_state()
    BASE_MODULES = module_snapshot()

    # -- serving the parent's requests -----------------------------------------------
    impls: dict[str, object] = {}
    kept: dict[str, list[tuple[object, object]]] = {}  # role -> (output, its copy) of the last call
    kept_args: dict[str, dict] = {}  # role -> the last call's inputs (for a same-pointers probe)

    def sync() -> None:
        if device.startswith("cuda"):
            torch.cuda.synchronize()

    def plain(value: object, what: str) -> object:
        if isinstance(value, Tensor) and type(value) is not Tensor:
            raise TypeError(f"{what} is a {type(value).__module__}.{type(value).__qualname__}, not a torch.Tensor (a subclass can make comparisons lie)")
        return value

    def observed(obs) -> dict:
        return {
            "launches": [{"kernel": l.kernel, "args": l.args, "resources": l.resources, "inputs": l.inputs} for l in obs.launches[:200]],
            "n_launches": len(obs.launches),
            "torch_calls": dict(obs.torch_calls), "aten_calls": dict(obs.aten_calls),
            "threads": obs.threads, "streams": obs.streams, "patched": obs.patched, "calls": obs.calls,
        }

    def fresh(role: str, rets: tuple, args: dict) -> None:
        """A later call must not change an earlier result, nor return the earlier result's memory.
        An output in the memory of one of this call's own inputs (an in-place state update
        returned to the caller, as FLA's recurrent kernels do) is the caller's tensor, not a
        buffer of the candidate's: it is left out."""
        own = {a.untyped_storage().data_ptr() for a in args.values() if isinstance(a, Tensor) and a.numel()}
        rets = tuple(r for r in rets if not (isinstance(r, Tensor) and r.numel() and r.untyped_storage().data_ptr() in own))
        for out, copy in kept.get(role, []):
            if not torch.equal(out.nan_to_num(0.5), copy.nan_to_num(0.5)) or not torch.equal(out.isnan(), copy.isnan()):
                report("stale output", "a later call changed an earlier call's output (outputs are views of a buffer it reuses)")
                break
        old = {o.untyped_storage().data_ptr() for o, _ in kept.get(role, []) if o.numel()}
        if any(isinstance(r, Tensor) and r.numel() and r.untyped_storage().data_ptr() in old for r in rets):
            report("stale output", "returns the memory of its previous call's output (a persistent buffer)")
        kept[role] = [(r, r.detach().clone()) for r in rets if isinstance(r, Tensor)]

    def do_load(req: dict) -> dict:
        state["forbidden_imports"].update(req.get("forbidden_imports", []))
        path = os.path.realpath(req["path"])
        state["untrusted"].add(path)
        monitor.UNTRUSTED.update({path, req["path"]})
        obs = Observed()
        snap = module_snapshot()
        with watch(obs):
            module = load_module(req["path"], req["module"])
        check_modules(snap, "at import")
        check_state("at import")
        launcher = getattr(module, req["launcher"], None)
        if not callable(launcher):
            raise AttributeError(f"no launcher '{req['launcher']}'")
        impls[req["role"]] = launcher
        return {"observed": observed(obs)}

    def do_call(req: dict) -> dict:
        launcher = impls[req["role"]]
        args = tload(req["inputs"], weights_only=True)
        if req.get("same_tensors") and req["role"] in kept_args:  # new contents in the previous call's tensors
            old = kept_args[req["role"]]
            for name, value in args.items():
                if isinstance(value, Tensor) and isinstance(old.get(name), Tensor) and old[name].shape == value.shape:
                    old[name].copy_(value)
                    args[name] = old[name]
        kept_args[req["role"]] = args
        fill = math.nan if req.get("fill") is None else float(req["fill"])
        obs = Observed() if req.get("watch") else None
        snap = module_snapshot()
        with nan_filled_empty(fill):
            with watch(obs) if obs is not None else contextlib.nullcontext():
                ret = launcher(**args)
                sync()
        if obs is not None:
            monitor.name_inputs(obs.launches, args)
        check_modules(snap, "during a call")
        check_state("during a call")
        rets = None if ret is None else tuple(ret) if isinstance(ret, (tuple, list)) else (ret,)
        for i, r in enumerate(rets or ()):
            plain(r, f"output {i}")
        fresh(req["role"], rets or (), args)
        tsave({"ret": rets, "args": args}, req["out"])
        return {"observed": observed(obs) if obs is not None else None}

    def do_time(req: dict) -> dict:
        roles, restored = req["roles"], req.get("restored", [])
        args = {role: tload(req["inputs"], weights_only=True, map_location=device) for role in roles}
        pristine = {role: {n: args[role][n].clone() for n in restored} for role in roles}
        fns = {role: (lambda r=role: impls[r](**args[r])) for role in roles}

        def restorer(role):
            return lambda: [args[role][n].copy_(pristine[role][n]) for n in restored]

        restores = {role: restorer(role) for role in roles} if restored else None
        checks = set(req.get("check_rounds", []))
        samples: dict[str, dict] = {}

        def on_round(r: int, outs: dict) -> None:
            if r in checks:
                for role, ret in outs.items():
                    rets = None if ret is None else tuple(ret) if isinstance(ret, (tuple, list)) else (ret,)
                    samples[f"{r}:{role}"] = {
                        "ret": None if rets is None else tuple(plain(x, "timed output").detach().clone() if isinstance(x, Tensor) else x for x in rets),
                        "args": {n: args[role][n].detach().clone() for n in restored},
                    }

        snap = module_snapshot()
        inner = timing.inner_count(fns[roles[0]], timing.flush_buffer(device))
        times, inners = timing.time_interleaved(fns, device, int(req["rounds"]), inner=inner, restores=restores, on_round=on_round)
        check_modules(snap, "during the timed runs")
        check_state("during the timed runs")
        tsave({"times": times, "inners": inners, "samples": samples}, req["out"])
        return {}

    commands = {"load": do_load, "call": do_call, "time": do_time}
    preloaded.update(os.path.realpath(f) for m in list(sys.modules.values())
                     if isinstance(f := getattr(m, "__file__", None), str))
    requests = os.fdopen(req_fd, "rb", buffering=0)
    write(rep_fd, (dumps({"reply": {"ready": True, "pid": os.getpid()}}) + "\n").encode())
    while True:
        line = requests.readline()
        if not line:
            return 0
        req = json.loads(line)
        if req.get("cmd") == "exit":
            return 0
        state["role"], state["armed"] = req.get("role", ""), True
        try:
            reply = {"ok": True, **commands[req["cmd"]](req)}
        except BaseException as e:  # noqa: BLE001 - SystemExit and KeyboardInterrupt from a candidate included
            text = str(e).strip().splitlines()[0][:300] if str(e).strip() else ""
            reply = {"ok": False, "error": f"{type(e).__name__}: {text}" if text else type(e).__name__}
        finally:
            state["armed"] = False
        write(rep_fd, (dumps({"reply": reply}, default=str) + "\n").encode())


if __name__ == "__main__":
    sys.exit(main(sys.argv))
