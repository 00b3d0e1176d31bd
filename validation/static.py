"""Static integrity checks: what the candidate's source says it does, read with `ast`.

Only host code is read (everything outside `@triton.jit` bodies): that is where
a candidate could compute its result with torch or another library instead of
its kernel, start threads, create streams, cache results by pointer or shape,
or patch timers. Resource limits are also read from kernel decorators
(`triton.Config`). Findings that the baseline's own source also has are not
held against the candidate (a baseline that reduces split-K partials with
`.sum()` lets its rewrite do the same); resource limits are absolute.

Each group gives one passing CheckResult, or one failing CheckResult per finding
with its line. The runtime checks in integrity.py back these up for code that
hides from a reader (`getattr(torch, "mat" + "mul")`).
"""
from __future__ import annotations

import ast
from dataclasses import dataclass

from patterns.core.records import CheckResult
from patterns.core.ops import split_target
from patterns.validation.loader import Impl
from patterns.core.opspec import OpSpec

# torch calls a launcher may make: allocation, metadata and device queries
ALLOWED_TORCH = {
    "torch.empty", "torch.empty_like", "torch.empty_strided", "torch.zeros", "torch.zeros_like",
    "torch.ones", "torch.ones_like", "torch.full", "torch.full_like", "torch.arange", "torch.tensor",
    "torch.as_tensor", "torch.device", "torch.dtype", "torch.finfo", "torch.iinfo", "torch.is_tensor",
    "torch.Size", "torch.is_floating_point", "torch.promote_types", "torch.broadcast_shapes",
    "torch.get_default_dtype", "torch.no_grad", "torch.inference_mode",
    "torch.cuda.current_device", "torch.cuda.device", "torch.cuda.device_count", "torch.cuda.current_stream",
    "torch.cuda.is_available", "torch.cuda.get_device_properties", "torch.cuda.get_device_capability",
    "torch.cuda.get_device_name", "torch.cuda.synchronize",
}
# tensor methods that compute values: a launcher that calls one computes (part of) its result in torch
COMPUTE_METHODS = {
    "matmul", "mm", "bmm", "mv", "dot", "einsum", "sum", "mean", "prod", "cumsum", "cumprod", "softmax",
    "log_softmax", "exp", "exp2", "log", "sqrt", "rsqrt", "pow", "norm", "var", "std", "amax", "amin",
    "argmax", "argmin", "sigmoid", "tanh", "relu", "silu", "gelu", "softplus", "mul", "mul_", "add", "add_",
    "sub", "sub_", "div", "div_", "addmm", "baddbmm", "addcmul", "addcdiv", "lerp", "masked_fill",
    "abs", "neg", "reciprocal", "square", "clamp", "clip", "topk", "sort", "scatter", "scatter_add",
    "index_add", "gather", "outer", "tril", "triu", "numpy", "tolist", "sigmoid_", "exp_",
}
STREAM_CALLS = {"torch.cuda.Stream", "torch.cuda.stream", "torch.cuda.ExternalStream", "torch.cuda.set_stream", "torch.cuda.streams.Stream"}
THREAD_MODULES = {"threading", "_thread", "concurrent", "multiprocessing", "asyncio"}
THREAD_CALLS = {
    "threading.Thread", "threading.Timer", "_thread.start_new_thread", "concurrent.futures.ThreadPoolExecutor",
    "concurrent.futures.ProcessPoolExecutor", "multiprocessing.Process", "multiprocessing.Pool",
    "concurrent.futures.thread.ThreadPoolExecutor", "asyncio.to_thread", "asyncio.run",
}
LIBRARIES = {
    "numpy", "scipy", "cupy", "jax", "tensorflow", "numba", "flash_attn", "fla", "sgl_kernel", "sglang",
    "vllm", "deep_gemm", "xformers", "flashinfer", "cutlass", "apex", "transformer_engine", "pycuda",
    "ctypes", "cffi", "subprocess", "importlib", "torch.utils.cpp_extension", "unittest.mock", "mock",
}
CACHE_DECORATORS = {"functools.lru_cache", "functools.cache", "lru_cache", "cache"}


@dataclass
class Finding:
    group: str
    key: str  # compared with the baseline's findings
    reason: str
    line: int


GROUPS = ("torch ops", "libraries", "threads", "streams", "caches", "patching", "resource limits")


def static_checks(spec: OpSpec, baseline: Impl, candidate: Impl) -> list[CheckResult]:
    allowed = {f.key for f in scan(baseline.source, spec) if f.group != "resource limits"}
    found = [f for f in scan(candidate.source, spec) if f.key not in allowed]
    checks = []
    for group in GROUPS:
        mine = [f for f in found if f.group == group]
        name = f"static: {group}"
        if not mine:
            checks.append(CheckResult(name=name, layer="integrity", passed=True, reason=f"integrity: no {group} findings in {candidate.path.name}"))
        for f in mine:
            checks.append(CheckResult(name=name, layer="integrity", passed=False, reason=f.reason, details={"line": f.line, "file": str(candidate.path)}))
    return checks


def scan(source: str, spec: OpSpec) -> list[Finding]:
    tree = ast.parse(source)
    return _Scanner(tree, spec).run()


def limit_names(spec: OpSpec) -> dict[str, int]:
    """Declared limits by launch-parameter name, lower case: `max_num_warps` and `num_warps`
    both name num_warps; `max_num_kv_splits` also names a constexpr NUM_KV_SPLITS."""
    return {(k[4:] if k.startswith("max_") else k).lower(): v for k, v in spec.resource_limits.items()}


class _Scanner:
    def __init__(self, tree: ast.Module, spec: OpSpec):
        self.tree = tree
        self.spec = spec
        self.aliases: dict[str, str] = {}
        self.findings: list[Finding] = []
        self.module_names: set[str] = set()
        self.constants: dict[str, object] = {}
        self.reference_module = split_target(spec.reference)[0].rsplit("/", 1)[-1].removesuffix(".py").rsplit(".", 1)[-1]
        self.limits = limit_names(spec)

    # -- helpers -------------------------------------------------------------------
    def add(self, group: str, key: str, reason: str, node: ast.AST) -> None:
        line = getattr(node, "lineno", 0)
        finding = Finding(group, key, f"integrity: {reason} (line {line})", line)
        if finding not in self.findings:  # one per line and reason, however many nodes say it
            self.findings.append(finding)

    def dotted(self, node: ast.AST) -> str:
        if isinstance(node, ast.Name):
            return self.aliases.get(node.id, node.id)
        if isinstance(node, ast.Attribute):
            base = self.dotted(node.value)
            return f"{base}.{node.attr}" if base else ""
        if isinstance(node, ast.Call):
            return self.dotted(node.func)
        return ""

    def is_module(self, node: ast.AST) -> bool:
        """Whether an expression names an imported module (or something imported from one)."""
        while isinstance(node, ast.Attribute):
            node = node.value
        return isinstance(node, ast.Name) and node.id in self.aliases

    def is_jit(self, fn: ast.FunctionDef) -> bool:
        return any(self.dotted(d).rsplit(".", 1)[-1] == "jit" for d in fn.decorator_list)

    # -- walk ----------------------------------------------------------------------
    def run(self) -> list[Finding]:
        for node in ast.walk(self.tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                self.visit_import(node)
        for node in self.tree.body:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
            for t in targets:
                if isinstance(t, ast.Name):
                    self.module_names.add(t.id)
                    try:
                        self.constants[t.id] = ast.literal_eval(node.value)
                    except (ValueError, TypeError, SyntaxError):
                        pass
        self.visit_host(self.tree, {})
        return self.findings

    def visit_import(self, node: ast.Import | ast.ImportFrom) -> None:
        if isinstance(node, ast.Import):
            mods = [a.name for a in node.names]
            for a in node.names:
                self.aliases[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        else:
            base = ("." * node.level) + (node.module or "")
            mods = [base] + [f"{base}.{a.name}" for a in node.names]
            for a in node.names:
                self.aliases[a.asname or a.name] = f"{node.module or ''}.{a.name}".lstrip(".")
        for mod in mods:
            root = mod.lstrip(".")
            if any(root == lib or root.startswith(lib + ".") for lib in LIBRARIES):
                lib = next(lib for lib in sorted(LIBRARIES, key=len, reverse=True) if root == lib or root.startswith(lib + "."))
                self.add("libraries", f"lib:{lib}", f"uses {lib} in place of its kernel (import {root})", node)
                break
            if root.split(".")[0] in THREAD_MODULES:
                self.add("threads", f"import:{root.split('.')[0]}", f"imports {root.split('.')[0]}", node)
                break
            if mod.split(".")[-1] == self.reference_module or mod.endswith(f".{self.reference_module}"):
                self.add("libraries", "reference", f"imports the reference implementation ({mod.lstrip('.')})", node)
                break

    def visit_host(self, node: ast.AST, local: dict[str, ast.AST]) -> None:
        """Host code: every node outside @triton.jit bodies; `local` maps names to their last simple assignment."""
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for d in child.decorator_list:
                    self.visit_host(d, local)
                    self.check_decorator(d, child)
                if isinstance(child, ast.FunctionDef) and self.is_jit(child):
                    continue
                self.visit_host(child, {})
                continue
            if isinstance(child, ast.Assign) and len(child.targets) == 1 and isinstance(child.targets[0], ast.Name):
                local[child.targets[0].id] = child.value
            self.check_node(child, local)
            self.visit_host(child, local)

    def check_decorator(self, d: ast.AST, fn: ast.FunctionDef) -> None:
        if self.dotted(d) in CACHE_DECORATORS and any(
            isinstance(n, ast.Call) and isinstance(n.func, ast.Subscript) for n in ast.walk(fn)
        ):
            self.add("caches", "cache:lru_cache", f"result cached by {self.dotted(d)} ({fn.name})", d)

    def check_node(self, node: ast.AST, local: dict[str, ast.AST]) -> None:
        if isinstance(node, ast.Call):
            self.check_call(node, local)
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
            self.add("torch ops", "@", "uses the @ operator in launcher (a matmul outside the kernel)", node)
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                self.check_target(t, node)
        elif isinstance(node, ast.Subscript):
            self.check_cache(node.value, node.slice, local, node)
        elif isinstance(node, ast.Compare) and any(isinstance(op, (ast.In, ast.NotIn)) for op in node.ops):
            self.check_cache(node.comparators[0], node.left, local, node)
        elif isinstance(node, ast.keyword) and node.arg and node.arg.lower() in self.limits:
            self.check_limit(node.arg, node.value, node)
        elif isinstance(node, ast.Dict):
            for k, v in zip(node.keys, node.values):
                if isinstance(k, ast.Constant) and isinstance(k.value, str) and k.value.lower() in self.limits:
                    self.check_limit(k.value, v, node)

    def check_call(self, node: ast.Call, local: dict[str, ast.AST]) -> None:
        name = self.dotted(node.func)
        if name in STREAM_CALLS:
            self.add("streams", "stream", f"creates a CUDA stream ({name})", node)
        elif name in THREAD_CALLS:
            self.add("threads", f"thread:{name}", f"starts a thread ({name})", node)
        elif name.startswith("torch.") and name not in ALLOWED_TORCH and self.is_module(node.func):
            self.add("torch ops", name, f"calls {name} in launcher", node)
        elif name == "setattr" and node.args and self.is_module(node.args[0]):
            attr = node.args[1].value if len(node.args) > 1 and isinstance(node.args[1], ast.Constant) else "?"
            self.add("patching", f"patch:{self.dotted(node.args[0])}.{attr}", f"patches {self.dotted(node.args[0])}.{attr}", node)
        elif isinstance(node.func, ast.Attribute) and not self.is_module(node.func):
            method = node.func.attr
            if method in COMPUTE_METHODS:
                self.add("torch ops", f"Tensor.{method}", f"calls Tensor.{method} in launcher", node)
            elif method in ("get", "setdefault", "pop") and node.args:
                self.check_cache(node.func.value, node.args[0], local, node)
        lib = next((lib for lib in LIBRARIES if name == lib or name.startswith(lib + ".")), None)
        if lib and self.is_module(node.func):
            self.add("libraries", f"lib:{lib}", f"uses {lib} in place of its kernel ({name})", node)

    def check_target(self, target: ast.AST, node: ast.AST) -> None:
        if isinstance(target, ast.Attribute) and self.is_module(target.value):
            dotted = f"{self.dotted(target.value)}.{target.attr}"
            self.add("patching", f"patch:{dotted}", f"patches {dotted}", node)
        elif isinstance(target, ast.Name) and target.id.lower() in self.limits:
            self.check_limit(target.id, node.value, node)

    def check_cache(self, container: ast.AST, key: ast.AST, local: dict[str, ast.AST], node: ast.AST) -> None:
        """A lookup in a module-level container keyed by a pointer, an id or a shape."""
        if not (isinstance(container, ast.Name) and container.id in self.module_names):
            return
        kind = self.key_kind(key, local, depth=0)
        if kind:
            self.add("caches", f"cache:{kind}", f"result cached by {kind} ({container.id})", node)

    def key_kind(self, key: ast.AST, local: dict[str, ast.AST], depth: int) -> str:
        for n in ast.walk(key):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "data_ptr":
                return "data_ptr"
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "id":
                return "id"
            if (isinstance(n, ast.Attribute) and n.attr == "shape") or (
                isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in ("size", "stride")
            ):
                return "shape"
            if isinstance(n, ast.Name) and n.id in local and depth < 3 and local[n.id] is not key:
                kind = self.key_kind(local[n.id], local, depth + 1)
                if kind:
                    return kind
        return ""

    def check_limit(self, name: str, value: ast.AST, node: ast.AST) -> None:
        try:
            v = ast.literal_eval(value)
        except (ValueError, TypeError, SyntaxError):
            v = self.constants.get(value.id) if isinstance(value, ast.Name) else None
        limit = self.limits[name.lower()]
        if isinstance(v, (int, float)) and not isinstance(v, bool) and v > limit:
            self.add("resource limits", f"limit:{name}", f"{name}={v} exceeds declared limit {limit}", node)
