"""Technique features the distiller mines: each row names a technique by the facts that show it.

A row is data, not code (as rules are in Semgrep or tinygrad): an id, a title, a
category, the scope it is read on (a Triton kernel, a C++/CUDA function, or a
Python file's host code), and `when` -- the condition, written in the library's
own predicate language (patterns.core.predicates), that holds where upstream
uses the technique. The condition *is* the draft's `present_when`, so a draft's
support and contrast are measured with exactly what a reviewer would accept.

The families follow what names a technique in upstream code: decorator and
launch metadata (heuristics flags, specialisation hints, autotune keys and
prune/restore hooks), index arithmetic (offset dtypes, variable-length and
paged/indirect indexing), precision settings, synchronisation and atomics, the
memory hierarchy and Hopper/Blackwell features on the CUDA side (TMA variants,
clusters, warp-group MMA, tensor memory, launch bounds), host dispatch and
registration, and the names of kernels and helpers.

`does` is the short description written into each upstream location's note;
`safety` and `bottlenecks` are the distiller's guesses from what the technique
changes, for a reviewer to confirm; `min_sm` is the architecture it needs.
Which rows become drafts is decided by the upstream code: support, contrast and
whether the library already has the technique (patterns.distill.discover).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from patterns.core.schema import Category, Safety

Scope = Literal["kernel", "native", "host"]


@dataclass(frozen=True)
class Technique:
    id: str
    title: str
    category: Category
    scope: Scope
    family: str
    when: Any  # present_when, as pattern.yaml writes it
    does: str
    safety: Safety = Safety.exact
    bottlenecks: tuple[str, ...] = ("memory-bound",)
    min_sm: int | None = None
    tags: tuple[str, ...] = field(default_factory=tuple)


C, S = Category, Safety
_TL_TO = ["(\\w*\\.)*to", "tl\\.cast"]


def _nat(kind: str, names: list[str] | None = None) -> dict:
    args: dict = {"kinds": [kind]}
    if names:
        args["names"] = names
    return {"native_construct": args}


TECHNIQUES: list[Technique] = [
    # -- index arithmetic -----------------------------------------------------------------
    Technique("varlen_cu_seqlens_indexing", "Variable-length batches indexed by cumulative sequence offsets", C.memory, "kernel", "index",
              {"all": [{"param": {"names": ["cu_seqlens\\w*"]}}, {"calls_like": {"name": ["tl\\.load"], "depends_on": ["cu_seqlens\\w*"]}}]},
              "reads the sequence's start and end from cu_seqlens so packed sequences need no padding"),
    Technique("varlen_chunk_index_grid", "Grid over (sequence, chunk) pairs precomputed for packed variable-length input", C.parallelism, "kernel", "index",
              {"all": [{"param": {"names": ["chunk_indices"]}}, {"calls_like": {"name": ["tl\\.load"], "depends_on": ["chunk_indices"]}}]},
              "maps its program id to a (sequence, chunk) pair read from chunk_indices, so the grid covers only real chunks",
              bottlenecks=("occupancy-bound",)),
    Technique("paged_kv_indirect_gather", "KV cache read through a page or block table", C.memory, "kernel", "index",
              {"indirect_load": {"index": ["(?i).*(block_table|req_to_token|page_table|kv_indices|page_indices|slot_mapping|block_tables|kv_indptr|req_pool_indices|page_idx|pages).*"]}},
              "gathers KV rows at addresses read from a page/block table, so the cache can be paged"),
    Technique("moe_sorted_token_gather", "MoE tokens gathered through expert-sorted token ids", C.memory, "kernel", "index",
              {"indirect_load": {"index": ["(?i).*(sorted_token_ids|sorted_ids|token_ids|expert_ids|topk_ids|src2dst|token_indices|expert_idx).*"]}},
              "loads or stores token rows through ids sorted by expert, so one program works on one expert's tokens"),
    Technique("sparse_block_index_gather", "Block-sparse attention over selected key blocks", C.compute, "kernel", "index",
              # with a dot: attention over the gathered blocks, not an index translation or a CSR build
              {"all": [{"indirect_load": {"index": ["(?i).*(block_indices|block_idx|topk_idx|topk_indices|block_counts|sparse_idx|sparse_indices|kv_block_idx|q_block_idx).*"]}}, "dot"]},
              "visits only the key/value blocks named by a per-query index list", bottlenecks=("compute-bound", "memory-bound")),
    Technique("int64_offset_promotion", "Offsets promoted to int64 before address arithmetic", C.numerics, "kernel", "offset-dtype",
              {"calls_with_arg": {"name": _TL_TO, "arg": ["tl\\.u?int64\\b"]}},
              "casts program ids or offsets to int64 before multiplying by strides, so large tensors do not overflow 32-bit offsets",
              bottlenecks=("numerics-risk",)),
    Technique("grid_axis_unflatten", "Program ids folded into one grid axis and unflattened in the kernel", C.parallelism, "kernel", "index",
              {"calls_like": {"name": ["(?i)(.*\\.)?_?unflatten_program_id\\w*", "(?i)(.*\\.)?_?(flat|fold)\\w*_pid\\w*"]}},
              "recovers several logical program axes from one flattened program id, so large grids stay within the per-axis launch limits",
              bottlenecks=("occupancy-bound",)),
    # -- decorator and launch metadata -----------------------------------------------------------
    Technique("runtime_dims_not_specialized", "Run-time lengths excluded from specialisation (do_not_specialize)", C.launch_scheduling, "kernel", "launch-metadata",
              {"jit_option": {"name": "do_not_specialize"}},
              "marks sequence lengths do_not_specialize, so a new length does not trigger a new compilation",
              bottlenecks=("launch-bound", "host-bound")),
    Technique("optional_input_heuristic_flags", "Optional inputs turned into compile-time flags by @triton.heuristics", C.compute, "kernel", "launch-metadata",
              {"heuristics": {"values": ["is not None"]}},
              "derives constexpr flags from which optional tensors are given, so unused branches compile away"),
    Technique("divisibility_heuristic_masks", "Mask-free fast path when sizes divide the tile (EVEN_* heuristics)", C.memory, "kernel", "launch-metadata",
              {"heuristics": {"values": ["%\\s*\\S+\\s*==\\s*0", "(?i)divisible"]}},
              "derives an EVEN flag from size % BLOCK == 0, so bounds masks are dropped when every tile is full"),
    Technique("autotune_prune_configs", "Autotune configs pruned before benchmarking (prune_configs_by)", C.launch_scheduling, "kernel", "launch-metadata",
              {"calls": {"name": ["triton.autotune"], "kwarg": "prune_configs_by"}},
              "prunes the autotune space per shape (early_config_prune / perf model) before any config is timed",
              bottlenecks=("launch-bound", "host-bound")),
    Technique("autotune_state_restore", "Autotuning kernels that update outputs in place (reset_to_zero / restore_value)", C.launch_scheduling, "kernel", "launch-metadata",
              {"any": [{"calls": {"name": ["triton.autotune"], "kwarg": "reset_to_zero"}}, {"calls": {"name": ["triton.autotune"], "kwarg": "restore_value"}}]},
              "resets or restores in-place outputs between autotune trials, so timing runs do not corrupt accumulated results",
              bottlenecks=("launch-bound",)),
    Technique("register_cap_maxnreg", "Register cap per thread chosen at launch (maxnreg)", C.parallelism, "kernel", "launch-metadata",
              {"any": [{"calls": {"name": ["triton.Config"], "kwarg": "maxnreg"}}, {"launch": {"kwargs": ["maxnreg"]}}]},
              "caps registers per thread so more warps fit per SM", bottlenecks=("occupancy-bound",)),
    Technique("alignment_contiguity_hints", "Alignment and contiguity hints for vectorised access (tl.multiple_of / tl.max_contiguous)", C.memory, "kernel", "launch-metadata",
              {"calls": {"name": ["tl.multiple_of", "tl.max_contiguous"]}},
              "tells the compiler offsets are aligned and contiguous, so loads become 128-bit vector accesses"),
    Technique("value_range_assumptions", "Value-range assumptions for the compiler (tl.assume)", C.compute, "kernel", "launch-metadata",
              {"calls": {"name": ["tl.assume"]}},
              "asserts strides or ids are positive, so index arithmetic simplifies", bottlenecks=("compute-bound",)),
    # -- precision ------------------------------------------------------------------------------
    Technique("dot_low_precision_accumulate", "tl.dot accumulating below fp32 (out_dtype / max_num_imprecise_acc)", C.numerics, "kernel", "precision",
              {"any": [{"calls": {"name": ["tl.dot"], "kwarg": "max_num_imprecise_acc"}}, {"calls": {"name": ["tl.dot"], "kwarg": "out_dtype", "kwarg_values": ["tl.float16", "tl.bfloat16", "tl.int32"]}}]},
              "sets the dot accumulator type or FP8 imprecise-accumulation window explicitly", S.numerics, ("compute-bound", "numerics-risk")),
    Technique("explicit_downcast_rounding", "Explicit rounding mode on down-casts (fp_downcast_rounding)", C.numerics, "kernel", "precision",
              {"any": [{"calls": {"name": ["tl.cast"], "kwarg": "fp_downcast_rounding"}}, {"calls_with_arg": {"name": ["(\\w*\\.)*to"], "arg": ["^['\"]?(rtne|rtz)['\"]?$"]}}]},
              "chooses round-to-nearest-even or round-toward-zero when casting fp32 to a narrower float", S.numerics, ("numerics-risk",)),
    Technique("dynamic_group_fp8_quant", "Dynamic per-group FP8/FP4 quantisation (absmax scale, clamp, cast)", C.quantization, "kernel", "precision",
              {"all": [{"calls": {"name": ["tl.abs"]}}, {"reduction": {"ops": ["tl.max"]}}, {"calls": {"name": ["tl.clamp", "tl.minimum", "tl.maximum"]}},
                       {"param": {"names": ["(?i).*(scale|_s)(_ptr)?", "(?i).*(fp8|f8|q)_(min|max)"]}}]},
              "computes each group's absmax, stores a scale and clamps the scaled values into the FP8 range before the cast", S.numerics, ("memory-bound",)),
    Technique("correctly_rounded_helpers", "Explicitly rounded arithmetic helpers for bit-reproducible results", C.numerics, "kernel", "precision",
              {"calls_like": {"name": ["(?i)(.*\\.)?_?(mul|add|sub|div|fma|sqrt|rcp)_r[nzdu]\\w*", "(?i)(.*\\.)?_?round_\\w+_to_\\w+", "libdevice\\.(mul|add|div|fma)_r[nzdu]\\w*"]}},
              "performs arithmetic through round-to-nearest helpers, so results match across batch sizes and kernels", S.numerics, ("numerics-risk",)),
    Technique("float_bit_manipulation", "Floats reinterpreted as integers for bit-level tricks (bitcast)", C.numerics, "kernel", "precision",
              {"any": [{"calls": {"name": ["tl.cast"], "kwarg": "bitcast", "kwarg_values": ["True"]}}, {"calls_with_arg": {"name": ["(\\w*\\.)*to"], "arg": ["^True$"]}}]},
              "reinterprets float bits as integers to round, pack or extract exponents without arithmetic", S.exact, ("compute-bound",)),
    Technique("autocast_custom_autograd", "Autograd functions with explicit autocast behaviour (custom_fwd / custom_bwd)", C.numerics, "host", "precision",
              {"host_calls": {"name": ["(.*\\.)?autocast_custom_(fwd|bwd)", "torch\\.(cuda\\.)?amp\\.custom_(fwd|bwd)"]}},
              "pins the dtype the kernels see under autocast in forward and backward", S.numerics, ("numerics-risk",)),
    # -- synchronisation and atomics --------------------------------------------------------------
    Technique("atomic_acquire_release_flags", "Inter-program signalling with acquire/release atomics", C.parallelism, "kernel", "sync",
              {"calls": {"name": ["tl.atomic_add", "tl.atomic_xchg", "tl.atomic_cas", "tl.atomic_max", "tl.atomic_or"], "kwarg": "sem", "kwarg_values": ["acquire", "release", "acq_rel"]}},
              "publishes or waits on a flag with acquire/release ordering, so one program can consume another's results", S.concurrency, ("launch-bound",)),
    Technique("atomic_cas_spin_wait", "Spin-wait on a global flag with atomic compare-and-swap", C.parallelism, "kernel", "sync",
              {"all": [{"calls": {"name": ["tl.atomic_cas", "tl.atomic_xchg"]}}, {"loop": {"kind": ["while"]}}]},
              "loops on an atomic compare-and-swap until another program releases a lock or sets a flag", S.concurrency, ("launch-bound",)),
    Technique("cta_barrier_on_scratch", "CTA-wide barrier between writes and reads of a scratch buffer (tl.debug_barrier)", C.parallelism, "kernel", "sync",
              {"calls": {"name": ["tl.debug_barrier"]}},
              "synchronises the threads of a program between writing and re-reading global scratch", S.concurrency, ("memory-bound",)),
    # -- in-kernel algorithms and special instructions ----------------------------------------------
    Technique("inline_ptx_elementwise", "Inline PTX for element-wise operations Triton lacks (tl.inline_asm_elementwise)", C.compute, "kernel", "special-instructions",
              {"calls": {"name": ["tl.inline_asm_elementwise"]}},
              "emits a PTX instruction per element (fast conversions, approximate math, packed ops)", S.numerics, ("compute-bound",), tags=("ptx",)),
    Technique("in_kernel_sort_topk", "Sorting and top-k inside a program (tl.sort / tl.topk)", C.compute, "kernel", "algorithm",
              {"calls": {"name": ["tl.sort", "tl.topk"]}},
              "sorts a block in registers to select top-k entries without a separate sort kernel", bottlenecks=("launch-bound", "memory-bound")),
    Technique("in_kernel_histogram", "Histogram built inside a program (tl.histogram)", C.compute, "kernel", "algorithm",
              {"calls": {"name": ["tl.histogram"]}},
              "counts values into bins within a program, e.g. tokens per expert"),
    Technique("in_kernel_prefix_sum", "Prefix sums inside a program (tl.cumsum)", C.compute, "kernel", "algorithm",
              {"calls": {"name": ["tl.cumsum"]}},
              "computes a running sum across a block in registers (log-gate cumsums, offsets per expert)"),
    Technique("register_gather", "Gather across a block held in registers (tl.gather)", C.memory, "kernel", "algorithm",
              {"calls": {"name": ["tl.gather"]}},
              "permutes or looks up values inside a block without a round trip through memory"),
    Technique("pack_unpack_join_split", "Pairs packed and unpacked in registers (tl.join / tl.split / tl.interleave)", C.memory, "kernel", "algorithm",
              {"calls": {"name": ["tl.join", "tl.split", "tl.interleave"]}},
              "joins or splits tensors along a new last axis, e.g. rotating halves or unpacking 4-bit pairs"),
    Technique("in_kernel_hash_rng", "Counter-based hashing for random numbers in the kernel", C.compute, "kernel", "algorithm",
              {"any": [{"calls_like": {"name": ["(?i)(.*\\.)?_?(murmur\\w*|philox\\w*|rotl32|hash\\w*)"]}}, {"calls": {"name": ["tl.rand", "tl.randn", "tl.randint", "tl.randint4x"]}}]},
              "derives random numbers from a seed and the element index, so sampling needs no state tensor", bottlenecks=("compute-bound",)),
    Technique("hadamard_rotation", "Fast Walsh-Hadamard rotation in registers", C.quantization, "kernel", "algorithm",
              {"any": [{"kernel_named": {"names": ["(?i)hadamard"]}}, {"calls_like": {"name": ["(?i)(.*\\.)?_?\\w*hadamard\\w*"]}}]},
              "rotates a vector with butterfly stages before quantising, spreading outliers across channels", S.numerics, ("compute-bound",)),
    Technique("triangular_block_inverse", "Unit lower-triangular inverse by blocked forward substitution (solve_tril)", C.compute, "kernel", "algorithm",
              {"kernel_named": {"names": ["(?i)solve_tril|merge_\\d+x\\d+|tril\\w*inv|inv\\w*tril"]}},
              "inverts the chunk's (I + A) lower-triangular matrix by small diagonal blocks merged upward", S.numerics, ("compute-bound",)),
    Technique("wy_representation", "Delta-rule updates in WY form (recompute w and u per chunk)", C.compute, "kernel", "algorithm",
              {"kernel_named": {"names": ["(?i)recompute_w_u|wy_fast|prepare_wy|_wy_"]}},
              "forms w = A k and u = A v per chunk so the sequential delta-rule updates become matmuls", S.numerics, ("compute-bound",)),
    Technique("fused_l2_normalization", "L2 normalisation fused with its rstd kept for the backward", C.fusion, "kernel", "algorithm",
              {"kernel_named": {"names": ["(?i)l2_?norm"]}},
              "normalises rows by their L2 norm in one pass and saves the reciprocal norm for the gradient"),
    Technique("token_shift_fusion", "Token shift (previous-token mixing) fused into one kernel", C.fusion, "kernel", "algorithm",
              {"kernel_named": {"names": ["(?i)token_shift|time_shift"]}},
              "mixes each token with its predecessor in place, with sequence boundaries from cu_seqlens"),
    Technique("causal_conv1d_with_state", "Short causal convolution with a rolling state cache", C.fusion, "kernel", "algorithm",
              {"kernel_named": {"names": ["(?i)causal_conv1d|short_conv|conv1d_update"]}},
              "convolves along time with a small kernel and keeps the last tokens as state for decoding"),
    # -- backend-specific programming models -------------------------------------------------------
    Technique("gluon_explicit_layouts", "Gluon kernels with explicit register and shared layouts", C.compute, "kernel", "programming-model",
              {"calls_like": {"name": [".*gluon\\.language\\.(BlockedLayout|SliceLayout|convert_layout|NVMMASharedLayout|SwizzledSharedLayout|DistributedLinearLayout|AutoLayout)"]}},
              "writes the kernel in Gluon with layouts chosen by hand instead of by the Triton compiler", bottlenecks=("compute-bound", "memory-bound")),
    Technique("gluon_async_copy", "Gluon asynchronous global-to-shared copies", C.memory, "kernel", "programming-model",
              {"calls_like": {"name": [".*gluon\\.language\\.nvidia\\.\\w+\\.(async_copy|tma)\\.\\w+", ".*gluon\\.language\\.\\w+\\.async_copy\\w*"]}},
              "issues cp.async/TMA copies into shared memory from Gluon and waits on them explicitly", min_sm=80),
    Technique("amd_buffer_ops", "AMD buffer loads and stores with hardware bounds checks", C.memory, "kernel", "programming-model",
              {"calls_like": {"name": [".*amd\\.\\w+\\.buffer_(load|store|atomic)\\w*", "tl\\.extra\\.hip\\.\\w+", ".*buffer_load_to_shared"]}},
              "reads through AMD buffer descriptors, whose out-of-range accesses return zero without a mask", tags=("amd",)),
    Technique("tilelang_pipelined_tiles", "TileLang tile programs with pipelined copies and fragments", C.compute, "kernel", "programming-model",
              {"calls_like": {"name": ["T\\.(Pipelined|alloc_fragment|alloc_shared|gemm|copy)"]}},
              "writes the kernel as a TileLang tile program: shared/fragment buffers and a pipelined K loop", bottlenecks=("compute-bound", "memory-bound")),
    # -- host: dispatch, registration, drivers --------------------------------------------------------
    Technique("backend_dispatch_decorator", "Kernel backends chosen by a dispatch decorator", C.launch_scheduling, "host", "dispatch",
              {"host_calls": {"name": ["(.*\\.)?backends\\.dispatch", "(.*\\.)?register_backend\\w*", "(.*\\.)?dispatch_(op|kernel)\\w*"]}},
              "routes the op to a Triton, TileLang or vendor backend through a decorator registry", bottlenecks=("host-bound",)),
    Technique("function_dispatch_table", "Implementations chosen through a module-level dispatch table", C.launch_scheduling, "host", "dispatch",
              {"dispatch_table": {"min_entries": 2}},
              "maps keys (dtype, mode, architecture) to kernel launchers in one table instead of an if-chain", bottlenecks=("host-bound",)),
    Technique("custom_op_registration", "Kernels registered as torch custom ops with fake implementations", C.launch_scheduling, "host", "dispatch",
              {"host_calls": {"name": ["torch\\.library\\.(custom_op|register_fake|triton_op|wrap_triton|impl|define|register_kernel)", "(.*\\.)?direct_register_custom_op", "(.*\\.)?register_custom_op\\w*", "(.*\\.)?register_fake\\w*"]}},
              "registers the launcher as a torch op with a fake (meta) implementation, so torch.compile and CUDA graphs can trace it",
              bottlenecks=("host-bound", "launch-bound")),
    Technique("jit_cuda_extension", "CUDA sources compiled at first use with shape constants as template arguments", C.launch_scheduling, "host", "dispatch",
              {"host_calls": {"name": ["(.*\\.)?load_jit\\w*", "torch\\.utils\\.cpp_extension\\.load\\w*", "(.*\\.)?load_inline", "(.*\\.)?jit_kernel\\w*", "(.*\\.)?compile_kernel\\w*"]}},
              "builds a CUDA module at run time with sizes and dtypes baked in as template arguments", bottlenecks=("compute-bound",)),
    Technique("context_parallel_driver", "Context-parallel chunk states exchanged between ranks", C.parallelism, "host", "dispatch",
              {"all": [{"host_calls": {"name": ["torch\\.distributed\\.(all_gather\\w*|send|recv|isend|irecv|all_to_all\\w*|batch_isend_irecv|P2POp|reduce_scatter\\w*|broadcast)"]}},
                       {"file_imports": {"modules": ["(?i).*(\\bcp\\b|context_parallel|\\.cp\\.|_cp$).*"]}}]},
              "splits a sequence across ranks and passes chunk states or boundary tokens between them", S.concurrency, ("memory-bound",)),
    Technique("arch_capability_dispatch", "Kernel variants chosen by GPU architecture at run time", C.launch_scheduling, "host", "dispatch",
              {"all": [{"host_calls": {"name": ["torch\\.cuda\\.get_device_capability", "(.*\\.)?is_(hopper|blackwell|sm\\d+|sm\\d+_supported|ampere)\\w*", "(.*\\.)?get_device_(sm|capability)\\w*"]}}, "has_kernel"]},
              "reads the device's compute capability and picks a kernel or configuration for it", bottlenecks=("compute-bound",)),
    # -- CUDA / C++: Hopper and Blackwell features ---------------------------------------------------
    Technique("warpgroup_mma_async", "Warp-group asynchronous MMA (wgmma) with explicit fences and waits", C.compute, "native", "cuda",
              _nat("wgmma"), "issues wgmma.mma_async on shared-memory descriptors, committing and waiting on groups", bottlenecks=("compute-bound",), min_sm=90),
    Technique("tcgen05_umma", "Blackwell tcgen05 UMMA with instruction descriptors", C.compute, "native", "cuda",
              _nat("umma"), "issues tcgen05 MMAs from one thread with shared-memory and instruction descriptors", bottlenecks=("compute-bound",), min_sm=100),
    Technique("tensor_memory_accumulators", "Accumulators in Blackwell tensor memory (TMEM)", C.memory, "native", "cuda",
              _nat("tmem"), "allocates tensor memory for accumulators and moves them to registers with tcgen05.ld", bottlenecks=("compute-bound",), min_sm=100),
    Technique("tma_multicast", "TMA multicast of shared operands across a thread-block cluster", C.memory, "native", "cuda",
              _nat("cluster", ["(?i)multicast"]), "loads an operand tile once per cluster and multicasts it to the CTAs that share it", min_sm=90),
    Technique("cluster_synchronization", "Thread-block cluster ranks and cluster-wide barriers", C.parallelism, "native", "cuda",
              _nat("cluster", ["(?i)cluster_(sync|arrive|wait)\\w*|block_rank_in_cluster|cluster_ctarank|ClusterDim\\w*"]),
              "synchronises the CTAs of a cluster and reads the CTA's rank inside it", S.concurrency, ("compute-bound",), min_sm=90),
    Technique("tma_reduce_store", "Partial results reduced into global memory by TMA (cp.reduce.async.bulk)", C.memory, "native", "cuda",
              _nat("tma_copy", ["(?i)reduce"]), "adds a tile into global memory with a TMA reduce-add instead of atomics", S.numerics, min_sm=90),
    Technique("stmatrix_epilogue", "Epilogue staged through shared memory with stmatrix", C.memory, "native", "cuda",
              _nat("stmatrix"), "writes accumulator fragments to shared memory with stmatrix before a TMA store", min_sm=90),
    Technique("ldmatrix_fragments", "Operand fragments loaded with ldmatrix", C.memory, "native", "cuda",
              _nat("ldmatrix"), "loads MMA operand fragments from shared memory with ldmatrix", bottlenecks=("compute-bound",), min_sm=75),
    Technique("async_proxy_fence", "Async-proxy fences between shared-memory writes and TMA reads", C.memory, "native", "cuda",
              _nat("proxy_fence"), "fences generic-proxy shared-memory writes before the TMA engine reads them", S.concurrency, min_sm=90),
    Technique("named_barrier_sync", "Named barriers synchronising a subset of warps", C.parallelism, "native", "cuda",
              _nat("named_barrier"), "syncs only the warps of one role with a numbered barrier", S.concurrency, ("occupancy-bound",)),
    Technique("elect_one_issue", "One elected lane issues TMA and MMA work", C.parallelism, "native", "cuda",
              _nat("elect_one"), "elects a single lane with elect.sync to issue asynchronous work for the warp", S.concurrency, ("compute-bound",), min_sm=90),
    Technique("l2_prefetch", "L2 or TMA prefetch ahead of use", C.memory, "native", "cuda",
              _nat("prefetch"), "prefetches data or descriptors into L2 before the loads that use them"),
    Technique("approximate_math_intrinsics", "Approximate math instructions (ex2.approx, __expf, __fdividef)", C.numerics, "native", "cuda",
              _nat("fast_math"), "uses approximate hardware math instead of IEEE library calls", S.numerics, ("compute-bound", "numerics-risk")),
    Technique("vectorized_global_access", "Vectorised (64/128-bit) and read-only global accesses", C.memory, "native", "cuda",
              _nat("vector_access"), "moves 8-16 bytes per thread per access through vector types (int4/float4, ld.global.nc)"),
    Technique("acquire_release_memory_order", "Acquire/release and volatile accesses between GPUs or CTAs", C.parallelism, "native", "cuda",
              _nat("memory_order"), "orders flag writes and reads with acquire/release or system fences", S.concurrency, ("launch-bound",)),
    Technique("ue8m0_scale_factors", "Power-of-two (UE8M0) scale factors for FP8 blocks", C.quantization, "native", "cuda",
              _nat("ue8m0"), "stores block scales as 8-bit exponents, so dequantisation is an exponent add", S.numerics, min_sm=90),
    Technique("dynamic_smem_opt_in", "Kernels opted in to more than 48 KB of dynamic shared memory", C.memory, "native", "cuda",
              _nat("smem_opt_in"), "raises the kernel's dynamic shared memory limit before launching it", bottlenecks=("occupancy-bound",)),
    Technique("launch_with_attributes", "Kernels launched with attributes (cluster dims, PDL) via cudaLaunchKernelEx", C.launch_scheduling, "native", "cuda",
              _nat("cluster_launch"), "launches with an attribute list: cluster dimensions or programmatic stream serialisation", bottlenecks=("launch-bound",)),
    Technique("cross_gpu_ipc_buffers", "Peer GPU buffers through CUDA IPC or NVSHMEM", C.parallelism, "native", "cuda",
              _nat("ipc"), "maps buffers of other GPUs into this process for one-sided reads and writes", S.concurrency, ("memory-bound",)),
    Technique("swizzled_shared_layouts", "Swizzled shared-memory layouts against bank conflicts", C.memory, "native", "cuda",
              # CUTLASS's ThreadblockSwizzle orders CTAs over the grid: a rasterisation, not a shared-memory layout
              _nat("swizzle", ["^(?!.*(?i:threadblock_?swizzle|swizzle_log_tile|GemmIdentityThreadblock)).*(?i:swizzle)"]),
              "stores tiles in shared memory with an XOR swizzle matching the TMA/MMA swizzle mode"),
    Technique("runtime_kernel_compilation", "Kernels compiled and loaded at run time (NVRTC, cuModuleLoad)", C.launch_scheduling, "native", "cuda",
              _nat("jit_compile"), "compiles generated CUDA source for the exact shape and loads the cubin with the driver API", bottlenecks=("compute-bound",)),
    Technique("packed_conversions", "Packed two-element conversions (cvt.rn.satfinite e4m3x2, float2 to bf16x2)", C.quantization, "native", "cuda",
              _nat("cvt_pack"), "converts two values per instruction, with saturation for FP8", S.numerics, ("compute-bound",)),
    Technique("warp_vote_compaction", "Warp votes and population counts for stream compaction", C.parallelism, "native", "cuda",
              # a lane mask (ballot, match, activemask) and its count: __all_sync/__any_sync alone are an early exit
              _nat("warp_vote", ["__ballot_sync|__match_\\w+_sync|__activemask|vote\\.sync\\.ballot|__popc\\w*"]),
              "builds a lane mask with __ballot_sync and counts it with __popc to compact or count selections", bottlenecks=("compute-bound",)),
    Technique("cub_block_collectives", "CUB block and warp collectives", C.parallelism, "native", "cuda",
              _nat("cub"), "reduces or scans across a block with cub::BlockReduce / BlockScan", bottlenecks=("compute-bound",)),
    Technique("warp_shuffle_reduction", "Warp-level reductions with shuffles", C.parallelism, "native", "cuda",
              # butterfly/down shuffles and warp reductions: a __shfl_sync broadcast of one lane's value is no reduction
              _nat("warp_shuffle", ["__shfl_(xor|down|up)_sync|__reduce_\\w+_sync|redux\\.sync|shfl\\.sync\\.(bfly|down|up)"]),
              "reduces values across the lanes of a warp with __shfl_xor_sync or redux.sync, without shared memory", S.numerics, ("compute-bound",)),
    Technique("global_atomic_accumulation", "Results combined with global atomics", C.parallelism, "native", "cuda",
              _nat("atomic", ["(?i)atomicAdd\\w*|atomicMax|atomicMin|\\bred\\.|atom\\.\\w*add"]),
              "merges per-block partial results or counters into global memory with atomic adds", S.numerics, ("memory-bound",)),
    Technique("cp_async_multistage", "Ampere cp.async copies into shared memory (the building block of multi-stage pipelines)", C.memory, "native", "cuda",
              _nat("cp_async"), "copies global data to shared memory asynchronously with cp.async, without staging it in registers", min_sm=80),
    Technique("mma_sync_tensor_cores", "Warp-level mma.sync tensor-core MMA", C.compute, "native", "cuda",
              _nat("mma", ["mma\\.sync|(?i:mma_sync)|SM80_\\w+|wmma::\\w+"]), "computes tiles with warp-level mma.sync instructions", bottlenecks=("compute-bound",), min_sm=80),
    Technique("launch_bounds_register_budget", "Register budget fixed per kernel with __launch_bounds__", C.parallelism, "native", "cuda",
              {"native_kernel": {"launch_bounds": True}}, "declares the block size (and minimum blocks per SM) so the compiler caps registers",
              bottlenecks=("occupancy-bound",)),
]

BY_ID = {t.id: t for t in TECHNIQUES}
