"""Kernel facts: the records patterns.core.facts extracts from a Python file (kernels,
launches, calls, loops) and distill.native from a C++/CUDA file.

Only these types, with the extractor's sources, feed the facts cache keys
(patterns.core.facts.extractor_digest), so editing a pattern or review record
keeps every cached fact.
"""
from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class _Facts(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)


class Param(_Facts):
    name: str
    constexpr: bool = False
    annotation: str = ""
    default: str | None = None


class CallSite(_Facts):
    """One call inside a kernel or host function, normalised (`tl.dot`, `tl.load`)."""

    name: str
    line: int
    args: list[str] = Field(default_factory=list)
    kwargs: dict[str, str] = Field(default_factory=dict)
    loops: list[int] = Field(default_factory=list, description="lines of the enclosing loops, outermost first")
    function: str = ""
    receiver: str = Field("", description="origin of the object a method is called on, e.g. tl.make_tensor_descriptor")
    first_arg_origin: str = Field("", description="call that produced the first argument, e.g. tl.make_block_ptr")
    operand_dtypes: list[str] = Field(default_factory=list, description="tl.dot operand dtypes where readable")
    via: str = Field("", description="@triton.jit helper this call was inlined from")
    pid_axes: list[int] = Field(default_factory=list, description="program_id axes the arguments depend on (a + facts.FOLDED_AXIS: the fast part `program_id(a) % n` of a folded axis)")
    depends_on: list[str] = Field(default_factory=list, description="variables the arguments derive from, transitively")

    @property
    def in_loop(self) -> bool:
        return bool(self.loops)


class LoopFacts(_Facts):
    line: int
    end_line: int
    kind: str = Field(description="range, tl.range, tl.static_range, while, iter")
    target: str = ""
    iter: str = ""
    num_stages: int | None = None
    kwargs: dict[str, str] = Field(default_factory=dict)
    depth: int = 0
    assigned: list[str] = Field(default_factory=list, description="names (re)assigned in the loop body, loop targets included")
    args: list[str] = Field(default_factory=list, description="positional arguments of the range call")
    start_pid_axes: list[int] = Field(default_factory=list, description="program_id axes the range's start depends on")
    via: str = Field("", description="@triton.jit helper this loop was inlined from (its lines are the helper's)")


class AutotuneFacts(_Facts):
    line: int
    configs: list[dict[str, str]] = Field(default_factory=list)
    key: list[str] = Field(default_factory=list)
    generated: bool = Field(False, description="configs built by an expression, count unknown")


class LaunchFacts(_Facts):
    """`kernel[grid](...)` in a host function."""

    kernel: str
    function: str
    line: int
    grid: str = ""
    grid_dims: int = 0
    grid_is_callable: bool = False
    args: list[str] = Field(default_factory=list)
    kwargs: dict[str, str] = Field(default_factory=dict)
    loops: list[int] = Field(default_factory=list)
    path: str = Field("", description="file of the launch when it is not the kernel's own file (set by the distiller)")


class KernelFacts(_Facts):
    name: str
    path: str
    line: int
    end_line: int
    docstring: str = ""
    decorators: list[str] = Field(default_factory=list)
    jit_kwargs: dict[str, str] = Field(default_factory=dict)
    params: list[Param] = Field(default_factory=list)
    autotune: AutotuneFacts | None = None
    heuristics: dict[str, str] = Field(default_factory=dict)
    calls: list[CallSite] = Field(default_factory=list)
    loops: list[LoopFacts] = Field(default_factory=list)
    dtypes: dict[str, str] = Field(default_factory=dict, description="local variable -> dtype where readable")
    origins: dict[str, str] = Field(default_factory=dict, description="local variable -> producing call")
    pid_deps: dict[str, list[int]] = Field(default_factory=dict, description="local variable -> program_id axes it depends on")
    assigns: dict[str, tuple[int, str]] = Field(default_factory=dict, description="local variable -> (line, last assigned expression)")
    first_assigns: dict[str, tuple[int, str]] = Field(default_factory=dict, description="local variable -> (line, first assigned expression), where it differs from the last (`x = f(x)` refinements)")
    accumulates: dict[str, list[str]] = Field(default_factory=dict, description="variable -> augmented assignments, 'add:<expr>'")
    accumulate_lines: dict[str, list[int]] = Field(default_factory=dict, description="variable -> lines of its augmented assignments (as accumulates)")
    assign_history: dict[str, list[tuple[int, str]]] = Field(default_factory=dict, description="variable -> (line, value) of every plain assignment to it, in order; assigns keeps the last")
    launches: list[LaunchFacts] = Field(default_factory=list)
    helpers: list[str] = Field(default_factory=list)
    loaded: list[str] = Field(default_factory=list, description="local variables whose value derives from a load from memory (tl.load, desc.load)")
    returns_value: bool = Field(False, description="has `return <value>`: a device function (kernels return nothing)")
    device_function: bool = Field(False, description="a @triton.jit helper, not a kernel: returns a value, or is called by a kernel of the file and never launched in it")

    def calls_named(self, *names: str) -> list[CallSite]:
        return [c for c in self.calls if c.name in names]

    @property
    def constexprs(self) -> list[str]:
        return [p.name for p in self.params if p.constexpr]

    def param(self, name: str) -> Param | None:
        return next((p for p in self.params if p.name == name), None)


# The CUDA/C++ constructs the native extractor (patterns.distill.native) recognises,
# kind -> what it is: the vocabulary of NativeConstruct.kind and of the
# native_construct predicate's `kinds`. The extractor recognises most by name
# (its RULES), the last five from the syntax tree.
NATIVE_KINDS: dict[str, str] = {
    "tma_copy": "bulk tensor copy through the Tensor Memory Accelerator",
    "tma_descriptor": "TMA tensor-map descriptor made, passed or prefetched",
    "mbarrier": "shared-memory transaction barrier (mbarrier) for async copies",
    "wgmma": "Hopper warpgroup MMA (wgmma.mma_async)",
    "umma": "Blackwell tcgen05 / UMMA tensor-core MMA",
    "mma": "warp-level mma.sync / WMMA tensor-core MMA",
    "reg_realloc": "warpgroup register reallocation (setmaxnreg) between producer and consumer warps",
    "cluster": "thread-block cluster / TMA multicast",
    "pdl": "programmatic dependent launch (griddepcontrol)",
    "fp8": "FP8 element types",
    "cp_async": "Ampere cp.async copies",
    "warp_shuffle": "warp shuffles and warp reductions",
    "atomic": "global atomics",
    "gil_release": "releases the Python GIL",
    "gil_acquire": "takes the Python GIL",
    "blocking_wait": "host call that blocks until something else finishes",
    "scale_ue8m0": "power-of-two (UE8M0, exponent-only) block scale factors",
    "tmem": "Blackwell tensor memory allocated, loaded or stored (tcgen05.alloc/ld/st)",
    "stmatrix": "stmatrix: registers to shared memory in MMA fragment layout",
    "ldmatrix": "ldmatrix: shared memory to registers in MMA fragment layout",
    "proxy_fence": "async-proxy fence between generic shared-memory writes and TMA/UMMA reads",
    "named_barrier": "named barrier (bar.sync/bar.arrive with an id) syncing a subset of warps",
    "elect_one": "elect.sync: one lane of a warp elected to issue work",
    "prefetch": "L2 or TMA prefetch ahead of use",
    "fast_math": "approximate math (ex2.approx, rcp.approx, __expf, __fdividef)",
    "vector_access": "128-bit vectorised or read-only (.nc / __ldg) global accesses",
    "memory_order": "acquire/release or volatile memory ordering, fences between agents",
    "ue8m0": "UE8M0 power-of-two scale factors",
    "smem_opt_in": "kernel attribute raising the dynamic shared memory limit",
    "cluster_launch": "launch with attributes (cudaLaunchKernelEx: cluster dims, PDL)",
    "ipc": "inter-process or inter-GPU memory (CUDA IPC handles, NVSHMEM)",
    "swizzle": "swizzled shared-memory layouts",
    "jit_compile": "kernels compiled at run time (NVRTC/NVCC, cuModuleLoad, cuLaunchKernel)",
    "cvt_pack": "packed conversions (cvt.rn.satfinite e4m3x2, float2 to bf16x2)",
    "warp_vote": "warp votes and bit counts (__ballot_sync, __popc) for compaction",
    "cub": "CUB block/warp collectives (BlockReduce, BlockScan, WarpReduce)",
    "persistent_loop": "a loop that fetches the next tile from a scheduler or strides by the grid (persistent kernel)",
    "scale_promotion": "scaled partial results accumulated into a higher-precision accumulator (`acc += scale * partial`)",
    "template_specialization": "explicit template specialisation (`template <>`)",
    "constexpr_dispatch": "`if constexpr` branches specialised at compile time",
    "launch_bounds": "__launch_bounds__ on a kernel",
}


class NativeConstruct(_Facts):
    """One recognised CUDA/C++ construct (a TMA copy, an mbarrier, a wgmma, ...) at a line."""

    kind: str = Field(description="construct kind, one of NATIVE_KINDS, e.g. tma_copy, mbarrier, wgmma, reg_realloc")
    name: str = Field(description="the call, type or PTX instruction that was recognised")
    line: int


class NativeFunctionFacts(_Facts):
    """A C++/CUDA function (free function, method or kernel) as read by the tree-sitter extractor."""

    name: str
    line: int
    end_line: int
    qualifiers: list[str] = Field(default_factory=list, description="__global__, __device__, CUTLASS_GLOBAL, __launch_bounds__, ...")
    template_params: list[str] = Field(default_factory=list)
    calls: list[str] = Field(default_factory=list, description="called names, template arguments stripped, deduplicated")
    constructs: list[NativeConstruct] = Field(default_factory=list)
    releases_gil: bool = False

    @property
    def is_kernel(self) -> bool:
        return any(q in ("__global__", "CUTLASS_GLOBAL") for q in self.qualifiers)


class PybindBinding(_Facts):
    """`m.def("name", &fn, ...)`: a C++ function exposed to Python."""

    name: str = Field(description="Python-visible name")
    target: str = Field("", description="bound C++ function, or '<lambda>'")
    line: int
    releases_gil: bool = Field(False, description="call_guard<gil_scoped_release> or a gil_scoped_release in the bound body")
    blocking: list[str] = Field(default_factory=list, description="calls in the bound body that wait (synchronize, wait, sleep, join, ...)")


class NativeFileFacts(_Facts):
    language: str = "cuda"
    functions: list[NativeFunctionFacts] = Field(default_factory=list)
    bindings: list[PybindBinding] = Field(default_factory=list)
    constructs: list[NativeConstruct] = Field(default_factory=list, description="constructs outside any function (specialisations, aliases)")
    includes: list[str] = Field(default_factory=list)
    parse_errors: int = Field(0, description="tree-sitter error nodes (macros it cannot expand)")

    def all_constructs(self) -> list[NativeConstruct]:
        return [c for f in self.functions for c in f.constructs] + self.constructs


class FileFacts(_Facts):
    path: str
    kernels: list[KernelFacts] = Field(default_factory=list)
    launches: list[LaunchFacts] = Field(default_factory=list)
    host_calls: list[CallSite] = Field(default_factory=list)
    host_functions: list[str] = Field(default_factory=list)
    imports: dict[str, str] = Field(default_factory=dict)
    constants: dict[str, str] = Field(default_factory=dict, description="module-level name -> assigned source text")
    docstring: str = ""
    host_assigns: dict[str, dict[str, tuple[int, str]]] = Field(
        default_factory=dict, description="host function -> local variable -> (line, last assigned expression)"
    )
    host_defaults: dict[str, dict[str, str]] = Field(
        default_factory=dict, description="host function -> parameter -> default value's source (what a caller gets by not passing it)"
    )
    module_calls: list[CallSite] = Field(
        default_factory=list, description="calls at module or class level, outside functions (library handles made at import)"
    )
    lines: int = 0
    native: NativeFileFacts | None = Field(None, description="CUDA/C++ facts when the file is native code (distiller)")

    def kernel(self, name: str) -> KernelFacts | None:
        return next((k for k in self.kernels if k.name == name), None)

