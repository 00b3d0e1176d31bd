"""`patterns spec init`: a spec.py for the user's own kernel, from its launcher's signature.

    patterns spec init softmax.py --reference-file ref.py --shape x=N,D --gpu-shape N=4096,D=4096

reads KERNEL.py without running it (ast): the launcher (`--kernel`, else the
one top-level function that launches a `@triton.jit` kernel), its parameters,
their annotations and defaults, and what its last `return` names (the outputs).
Every parameter without a default must be given: a tensor by `--shape
NAME=DIMS` (dimension names or ints), anything else by `--value NAME=LITERAL`.
A reference file may also define `make_inputs(shape, dtype, seed, device)`
(inputs the signature cannot describe: index tables, lengths), and
`bytes_moved` / `flops` (the traffic model); the spec then uses them.

The spec written (patterns.core.userspec explains its parts): the inputs, a
CPU grid of small odd sizes (from `--cpu-shape`, else derived from the GPU
shapes), the GPU shapes, per-dtype tolerances, and a partition check when the
launcher has a split parameter. It is then checked in a child process with a
time limit: the reference and the launcher are called once on the smallest
CPU shape and must return the same outputs with the same shapes, and the
reference must update every `--inplace` input in place (the gate compares an
in-place input as each side's own copy holds it after the call: a reference
that leaves it as it was expects the input unchanged; what a launcher only
writes as memory, or returns views of, is `--scratch`); any problem is one
line naming the file, exit 2. The gate itself (`patterns validate
SPEC.py`) is what judges correctness on the whole grid.
"""
from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from patterns.core import files
from patterns.core.ops import OpError
from patterns.core.opspec import ACCUMULATION

# parameters that split the work into partitions (the partition check's axis)
SPLIT_PARAM = re.compile(r"^(num_?(kv_?)?splits?|n_?splits?|split_?k|num_?partitions?|kv_?splits)$", re.IGNORECASE)
DTYPES = ("float32", "float16", "bfloat16")
# small odd sizes the CPU grid draws from (the interpreter runs every program in Python)
ODD = (1, 3, 7, 33, 127)
PROBE_TIMEOUT_S = 300


class SpecError(OpError):
    """Bad input to `spec init`: one line naming the file, exit 2."""


@dataclass
class Param:
    name: str
    annotation: str = ""
    default: Any = None
    has_default: bool = False


@dataclass
class Launcher:
    name: str
    params: list[Param]
    outputs: tuple[str, ...]
    line: int


@dataclass
class Request:
    kernel: Path
    launcher: str | None = None
    reference: str | None = None  # MODULE:FUNC
    reference_file: str | None = None  # ref.py[:FUNC]
    shapes: dict[str, tuple[str | int, ...]] = field(default_factory=dict)  # tensor -> dims
    dtypes: tuple[str, ...] = ()
    gpu_dtypes: tuple[str, ...] = ()
    pinned: dict[str, str] = field(default_factory=dict)  # tensor -> dtype
    storage: dict[str, tuple[str | int, ...]] = field(default_factory=dict)  # tensor -> dims in memory order
    values: dict[str, Any] = field(default_factory=dict)
    gpu_shapes: tuple[dict[str, int], ...] = ()
    cpu_shapes: tuple[dict[str, int], ...] = ()
    inplace: tuple[str, ...] = ()
    scratch: tuple[str, ...] = ()
    accumulation: str = "float32"  # the dtype its sums must accumulate in (OpSpec.accumulation)
    reduction: str | None = None  # the dimension its sums run over (OpSpec.reduction)
    out: Path | None = None
    force: bool = False


# --------------------------------------------------------------------------------------
# reading the kernel file
# --------------------------------------------------------------------------------------


def _parse(path: Path) -> ast.Module:
    try:
        return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except OSError as exc:
        raise SpecError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except SyntaxError as exc:
        raise SpecError(f"{path}: line {exc.lineno}: syntax error: {exc.msg}") from None


def _is_jit(fn: ast.FunctionDef) -> bool:
    for d in fn.decorator_list:
        text = ast.unparse(d)
        if "jit" in text or "autotune" in text or "heuristics" in text:
            return True
    return False


def _launches(fn: ast.FunctionDef, kernels: set[str]) -> bool:
    """Whether the function calls `kernel[grid](...)` or another function of the file by name."""
    for node in ast.walk(fn):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Subscript) and isinstance(node.func.value, ast.Name):
            if node.func.value.id in kernels:
                return True
    return False


def _out_name(node: ast.expr) -> str | None:
    """The name a returned expression stands for: `y`, `c.view(...)` -> c, `out.reshape(...)` -> out."""
    while True:
        if isinstance(node, ast.Name):
            return node.id
        if isinstance(node, ast.Call):
            node = node.func
        elif isinstance(node, (ast.Attribute, ast.Subscript)):
            node = node.value
        else:
            return None


def _outputs(fn: ast.FunctionDef, path: Path) -> tuple[str, ...]:
    returns = [n for n in ast.walk(fn) if isinstance(n, ast.Return) and n.value is not None
               and not (isinstance(n.value, ast.Constant) and n.value.value is None)]
    if not returns:
        return ()
    last = max(returns, key=lambda n: n.lineno)
    parts = last.value.elts if isinstance(last.value, ast.Tuple) else [last.value]
    names = []
    for i, part in enumerate(parts):
        name = _out_name(part)
        names.append(name if name and name not in names else f"out{i}")
    return tuple(names)


def read_launcher(path: Path, name: str | None = None) -> Launcher:
    """The launcher of KERNEL.py (see the module doc)."""
    tree = _parse(path)
    funcs = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    kernels = {f.name for f in funcs if _is_jit(f)}
    if name is not None:
        fn = next((f for f in funcs if f.name == name), None)
        if fn is None:
            raise SpecError(f"{path}: no top-level function '{name}' (functions: {', '.join(f.name for f in funcs) or 'none'})")
        if fn.name in kernels:
            raise SpecError(f"{path}: '{name}' is a @triton.jit kernel: give --kernel the Python function that launches it")
    else:
        launchers = [f for f in funcs if f.name not in kernels and not f.name.startswith("_") and _launches(f, kernels)]
        if len(launchers) != 1:
            found = ", ".join(f.name for f in launchers) or "none"
            raise SpecError(f"{path}: cannot tell the launcher (functions that launch a kernel: {found}): pass --kernel NAME")
        fn = launchers[0]
    a = fn.args
    if a.posonlyargs:
        raise SpecError(f"{path}:{fn.lineno}: {fn.name} has positional-only parameters: the gate calls launchers by keyword")
    positional = a.args
    defaults = [None] * (len(positional) - len(a.defaults)) + list(a.defaults)
    params = [Param(p.arg, ast.unparse(p.annotation) if p.annotation else "", *_default(d)) for p, d in zip(positional, defaults)]
    params += [Param(p.arg, ast.unparse(p.annotation) if p.annotation else "", *_default(d)) for p, d in zip(a.kwonlyargs, a.kw_defaults)]
    return Launcher(fn.name, params, _outputs(fn, path), fn.lineno)


def _default(node: ast.expr | None) -> tuple[Any, bool]:
    if node is None:
        return None, False
    try:
        return ast.literal_eval(node), True
    except ValueError:
        return ast.unparse(node), True


def _annotation_dtype(annotation: str) -> str:
    """A dtype an annotation pins (torch.LongTensor, an int32 comment-free hint), '' for none."""
    for hint, dtype in (("LongTensor", "int64"), ("IntTensor", "int32"), ("BoolTensor", "bool"), ("BFloat16Tensor", "bfloat16"),
                        ("HalfTensor", "float16"), ("FloatTensor", "float32")):
        if hint in annotation:
            return dtype
    return ""


def _functions(path: Path) -> set[str]:
    return {n.name for n in _parse(path).body if isinstance(n, ast.FunctionDef)}


# --------------------------------------------------------------------------------------
# the grid
# --------------------------------------------------------------------------------------


def cpu_grid(symbols: list[str], gpu_shapes: tuple[dict[str, int], ...]) -> tuple[dict[str, int], ...]:
    """Small odd sizes for the interpreter: a size constant over the GPU shapes and at most 128
    (a head dimension, which kernels often require to be a power of two) is kept; every other
    symbol cycles through ODD, offset by its position, so no two symbols are equal in a shape."""
    keep = {}
    for s in symbols:
        values = {g[s] for g in gpu_shapes if s in g}
        if len(values) == 1 and next(iter(values)) <= 128:
            keep[s] = next(iter(values))
    free = [s for s in symbols if s not in keep]
    n = max(3, min(len(ODD), len(free) + 2)) if free else 1
    return tuple({s: keep.get(s) or ODD[(free.index(s) + j) % len(ODD)] for s in symbols} for j in range(n))


# --------------------------------------------------------------------------------------
# writing the spec
# --------------------------------------------------------------------------------------


def _where(path: Path, folder: Path) -> str:
    """The spec's expression for a file: beside or below the spec, relative to it (the folder moves
    as one); elsewhere, its absolute path."""
    rel = os.path.relpath(path.resolve(), folder.resolve())
    return f"HERE / {rel!r}" if not rel.startswith("..") else repr(str(path.resolve()))


def _reference(req: Request, folder: Path, launcher: Launcher) -> tuple[str, Path | None]:
    """The spec's reference expression, and the reference file when one was given."""
    if req.reference and req.reference_file:
        raise SpecError("--reference and --reference-file: give one")
    if req.reference:
        module, sep, func = req.reference.rpartition(":")
        if not sep or not module or not func:
            raise SpecError(f"--reference: '{req.reference}' is not MODULE:FUNC")
        if module.endswith(".py"):
            return _reference(Request(req.kernel, reference_file=req.reference), folder, launcher)
        return repr(req.reference), None
    if not req.reference_file:
        raise SpecError("a reference is required: --reference MODULE:FUNC or --reference-file ref.py")
    file, _, func = (req.reference_file, "", "") if Path(req.reference_file).is_file() else req.reference_file.rpartition(":")
    ref = Path(file)
    if not ref.is_file():
        raise SpecError(f"{ref}: reference file not found")
    funcs = _functions(ref)
    if not func:
        public = sorted(f for f in funcs if not f.startswith("_") and f not in ("make_inputs", "bytes_moved", "flops"))
        func = "reference" if "reference" in funcs else launcher.name if launcher.name in funcs else public[0] if len(public) == 1 else ""
        if not func:
            raise SpecError(f"{ref}: cannot tell the reference function ({', '.join(public) or 'none'}): give ref.py:FUNC")
    elif func not in funcs:
        raise SpecError(f"{ref}: no top-level function '{func}'")
    return f'f"{{{_where(ref, folder)}}}:{func}"', ref


def _parse_value(text: str) -> Any:
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        raise SpecError(f"--value: '{text}' is not a Python literal (1e-6, True, 128, 'x')") from None


def render(req: Request) -> tuple[Path, str]:
    """(spec path, spec text) for the request; nothing written."""
    kernel = req.kernel
    if not kernel.is_file():
        raise SpecError(f"{kernel}: no such file")
    launcher = read_launcher(kernel, req.launcher)
    out = req.out or kernel.parent / "spec.py"
    folder = out.parent
    ref_expr, ref_file = _reference(req, folder, launcher)
    ref_funcs = _functions(ref_file) if ref_file else set()
    custom_inputs = "make_inputs" in ref_funcs
    names = {p.name for p in launcher.params}
    for what, given in (("--shape", req.shapes), ("--value", req.values), ("--dtype", req.pinned), ("--storage", req.storage)):
        unknown = sorted(set(given) - names)
        if unknown:
            raise SpecError(f"{kernel}: {launcher.name} has no parameter {', '.join(unknown)} ({what}); its parameters: {', '.join(p.name for p in launcher.params)}")
    for what, given in (("--inplace", req.inplace), ("--scratch", req.scratch)):
        unknown = sorted(set(given) - names)
        if unknown:
            raise SpecError(f"{kernel}: {launcher.name} has no parameter {', '.join(unknown)} ({what})")

    args: list[str] = []
    symbols: list[str] = []
    if not custom_inputs:
        for p in launcher.params:
            if p.name in req.shapes:
                dims = req.shapes[p.name]
                for d in dims:
                    symbols += [f for f in (d.split("*") if isinstance(d, str) else ()) if not f.isdigit() and f not in symbols]
                pinned = req.pinned.get(p.name) or _annotation_dtype(p.annotation)
                extra = f", dtype={pinned!r}" if pinned else ""
                if p.name in req.storage:
                    order = req.storage[p.name]
                    if sorted(map(str, order)) != sorted(map(str, dims)):
                        raise SpecError(f"{kernel}: --storage {p.name}={','.join(map(str, order))}: not an order of its --shape dimensions {','.join(map(str, dims))}")
                    extra += f", storage={tuple(order)!r}"
                args.append(f"    {p.name!r}: Tensor({', '.join(repr(d) for d in dims)}{extra}),")
            elif p.name in req.values:
                args.append(f"    {p.name!r}: {req.values[p.name]!r},")
            elif not p.has_default:
                hint = f" (annotated {p.annotation})" if p.annotation else ""
                raise SpecError(f"{kernel}:{launcher.line}: {launcher.name}'s parameter '{p.name}'{hint} has no default: "
                                f"give --shape {p.name}=DIMS for a tensor or --value {p.name}=VALUE")
    else:
        for s in (req.gpu_shapes or req.cpu_shapes):
            symbols += [k for k in s if k not in symbols]

    dtypes = req.dtypes or ("float32", "bfloat16")
    gpu_dtypes = req.gpu_dtypes or tuple(d for d in dtypes if d != "float32") or dtypes
    bad = [d for d in (*dtypes, *gpu_dtypes) if d not in DTYPES]
    if bad:
        raise SpecError(f"--dtype: {', '.join(bad)}: not one of {', '.join(DTYPES)} (or NAME=DTYPE for one input)")
    for given in (*req.gpu_shapes, *req.cpu_shapes):
        missing = [s for s in symbols if s not in given]
        if missing:
            raise SpecError(f"shape {','.join(f'{k}={v}' for k, v in given.items())}: no size for {', '.join(missing)}")
    if not req.cpu_shapes and not req.gpu_shapes:
        raise SpecError(f"{kernel}: no sizes: give --gpu-shape {','.join(f'{s}=...' for s in symbols) or 'N=...'} (the CPU grid is derived) or --cpu-shape")
    shapes = req.cpu_shapes or cpu_grid(symbols, req.gpu_shapes)
    if req.accumulation not in ACCUMULATION:
        raise SpecError(f"--accumulation: {req.accumulation}: not one of {', '.join(ACCUMULATION)}")
    if req.reduction is not None and any(req.reduction not in s for s in shapes):
        raise SpecError(f"--reduction: {req.reduction}: not a dimension of the shapes ({', '.join(shapes[0]) or 'none'})")

    outputs = launcher.outputs
    inplace = tuple(req.inplace)
    if not outputs and not inplace:
        raise SpecError(f"{kernel}:{launcher.line}: {launcher.name} returns nothing: name the inputs it writes with --inplace NAME")
    split = next((p.name for p in launcher.params if SPLIT_PARAM.match(p.name)), None)

    def shape_lines(grid) -> str:
        return "".join(f"        dict({', '.join(f'{k}={v}' for k, v in s.items())}),\n" for s in grid)

    helpers = ["TOLERANCES", *(["Tensor", "inputs_from"] if not custom_inputs else []), *(["split_partition"] if split else [])]
    lines = [
        f'"""The gate\'s spec of {launcher.name} in {kernel.name}: written by `patterns spec init`, edit freely.',
        "",
        "See the README (\"Your own kernel\") for what each field means; `patterns validate",
        f'{out.name}` checks the launcher against itself, `patterns agent {out.name}` optimises it."""',
        "from pathlib import Path",
        "",
        *(["from patterns.core.ops import load_function"] if custom_inputs or ref_funcs & {"bytes_moved", "flops"} else []),
        "from patterns.core.opspec import OpSpec",
        f"from patterns.core.userspec import {', '.join(helpers)}",
        "",
        "HERE = Path(__file__).resolve().parent",
    ]
    if custom_inputs:
        lines += [f'make_inputs = load_function(f"{{{_where(ref_file, folder)}}}:make_inputs", "make_inputs")']
    else:
        lines += ["", "# the launcher's arguments: tensors by dimension names (sizes from the shape), values as they are",
                  "ARGS = {", *args, "}", "make_inputs = inputs_from(ARGS)"]
    model = []
    for fn in ("bytes_moved", "flops"):
        if fn in ref_funcs:
            model.append(f'    {fn}=load_function(f"{{{_where(ref_file, folder)}}}:{fn}", "{fn}"),')
    tol = "{" + ", ".join(f"{d!r}: TOLERANCES[{d!r}]" for d in dict.fromkeys((*dtypes, *gpu_dtypes))) + "}"
    name = re.sub(r"[^a-z0-9_]", "_", launcher.name.lower()).strip("_") or "kernel"
    body = [
        "",
        f"TOLERANCE = {tol}",
        "",
        "SPEC = OpSpec(",
        f"    name={name!r},",
        f'    baseline=f"{{{_where(kernel, folder)}}}:{launcher.name}",',
        f"    reference={ref_expr},",
        "    make_inputs=make_inputs,",
        "    # correctness under the interpreter: small, odd sizes",
        "    shapes=(",
        shape_lines(shapes).rstrip("\n"),
        "    ),",
        f"    dtypes={tuple(dtypes)!r},",
        f"    gpu_dtypes={gpu_dtypes!r},",
        "    tolerance=TOLERANCE,",
        "    # timed on the GPU",
        "    gpu_shapes=(" + ("" if req.gpu_shapes else "),"),
    ]
    if req.gpu_shapes:
        body += [shape_lines(req.gpu_shapes).rstrip("\n"), "    ),"]
    body += [f"    outputs={outputs!r},"]
    if inplace:
        body.append(f"    inplace={inplace!r},")
    if req.scratch:
        body.append(f"    scratch={tuple(req.scratch)!r},")
    if split:
        body.append(f"    partition=split_partition({split!r}, (1, 2, 3, 4), TOLERANCE),")
    if req.accumulation != "float32":
        body.append(f"    accumulation={req.accumulation!r},")
    if req.reduction is not None:
        body.append(f"    reduction={req.reduction!r},")
    body += model + [")", ""]
    return out, "\n".join(lines + body)


def init_spec(req: Request, check: bool = True) -> Path:
    """Write the spec (atomically; an existing one only with force) and check it (see the module doc)."""
    out, text = render(req)
    if out.exists() and not req.force:
        raise SpecError(f"{out}: exists (--force to replace it, --out for another file)")
    if check:
        tmp = out.with_name(f".{out.stem}.check.py")
        files.write_atomic(tmp, text.encode())
        try:
            probe(tmp)
        finally:
            tmp.unlink(missing_ok=True)
    files.write_atomic(out, text.encode())
    return out


# --------------------------------------------------------------------------------------
# the check, in a child process
# --------------------------------------------------------------------------------------


def probe(spec_path: Path, baseline: Path | None = None, timeout: float = PROBE_TIMEOUT_S, device: str = "cpu") -> None:
    """Call the spec's reference and launcher (or `baseline`'s launcher of the same name) once, on the
    smallest CPU shape in the first dtype of the device (under Triton's interpreter on the CPU), in a
    child process with a time limit; SpecError naming the file when they do not fit."""
    env = dict(os.environ)
    if device == "cpu":
        env["TRITON_INTERPRET"] = "1"
    cmd = [sys.executable, "-m", "patterns.specinit", str(spec_path), device, *([str(baseline)] if baseline else [])]
    try:
        run = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        raise SpecError(f"{spec_path}: the check (one call of the reference and the launcher) ran over {timeout:g} s") from None
    lines = [ln for ln in run.stdout.splitlines() if ln.startswith("{")]
    if not lines:
        tail = (run.stderr.strip().splitlines() or ["no output"])[-1]
        raise SpecError(f"{spec_path}: the check died (exit {run.returncode}): {tail}")
    result = json.loads(lines[-1])
    if result.get("error"):
        raise SpecError(result["error"])


def _probe_here(spec_path: str, device: str = "cpu", baseline: str | None = None) -> str:
    """The check itself (run by `probe` in the child); '' when the spec fits, else the one-line error."""
    import dataclasses

    from patterns.core import interpreter
    from patterns.core.ops import load_reference, load_spec, resolve, source_path, split_target
    from patterns.validation.runner import ResultError, clone_inputs, collect

    from patterns.validation.runner import active_dtypes

    if device == "cpu":
        interpreter.install_cpu_shims()
    try:
        spec = load_spec(spec_path)
    except OpError as exc:
        return str(exc)
    if baseline:
        spec = dataclasses.replace(spec, baseline=f"{baseline}:{split_target(spec.baseline)[1]}")
    kernel, (_, launcher_name) = source_path(spec, spec.baseline), split_target(spec.baseline)
    ref_file = spec.reference.rpartition(":")[0]
    try:
        reference = load_reference(spec)
        launcher = resolve(spec, spec.baseline, "launcher")
    except OpError as exc:
        return str(exc)
    shape = min(spec.shapes, key=lambda s: (sum(s.values()), list(s.values())))
    dtype = active_dtypes(spec, device)[0]
    where = f"shape {','.join(f'{k}={v}' for k, v in shape.items())}, {dtype}, {device}"
    try:
        inputs = spec.make_inputs(dict(shape), dtype, spec.seeds[0], device)
    except Exception as exc:  # noqa: BLE001 - the user's code
        return f"{spec_path}: make_inputs failed at {where}: {type(exc).__name__}: {_first(exc)}"
    ref_args = clone_inputs(inputs)  # the reference's own copy: its in-place inputs are read from it after the call
    try:
        want = collect(spec, reference(**ref_args), ref_args)
    except ResultError as exc:
        return f"{ref_file}: the reference {exc} ({where})"
    except Exception as exc:  # noqa: BLE001
        return f"{ref_file}: the reference failed on the spec's inputs ({where}): {type(exc).__name__}: {_first(exc)}"
    try:
        args = clone_inputs(inputs)
        got = collect(spec, launcher(**args), args)
    except ResultError as exc:
        return f"{kernel}: the launcher {launcher_name} {exc} ({where})"
    except Exception as exc:  # noqa: BLE001
        return f"{kernel}: the launcher {launcher_name} cannot be called with the spec's inputs ({where}): {type(exc).__name__}: {_first(exc)}"
    for name, w in want.items():
        g = got.get(name)
        ws, gs = getattr(w, "shape", None), getattr(g, "shape", None)
        if ws is not None and tuple(ws) != tuple(gs or ()):
            return f"{ref_file}: the reference's output {name} has shape {tuple(ws)}, the launcher's {tuple(gs) if gs is not None else type(g).__name__} ({where})"
    for name in spec.inplace:
        # an in-place input is compared as each side's own copy holds it after the call: a reference
        # that returns new tensors and leaves it as it was makes the unchanged input the expected value
        before = inputs.get(name)
        if _same(ref_args.get(name), before):
            writes = " (the launcher writes it)" if not _same(args.get(name), before) else ""
            return (f"{ref_file}: the reference leaves in-place input {name} as it was{writes}: the gate compares an in-place "
                    f"input after the call, so the reference must update {name} in place; declare it --scratch instead if the "
                    f"launcher only uses its memory (working memory, or returned views of it) ({where})")
    return ""


def _same(a: Any, b: Any) -> bool:
    """Two tensors with the same shape and bits (NaN equal to NaN); False for anything but two tensors."""
    import torch

    if not isinstance(a, torch.Tensor) or not isinstance(b, torch.Tensor) or a.shape != b.shape or a.dtype != b.dtype:
        return False
    return bool(torch.equal(a.nan_to_num(0.5), b.nan_to_num(0.5)) and torch.equal(a.isnan(), b.isnan())) if a.is_floating_point() else bool(torch.equal(a, b))


def _first(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else ""


if __name__ == "__main__":
    try:
        error = _probe_here(sys.argv[1], sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else None)
    except Exception as exc:  # noqa: BLE001 - anything else: still one line for the parent
        error = f"{sys.argv[1]}: the check failed: {type(exc).__name__}: {_first(exc)}"
    print(json.dumps({"error": error}))
