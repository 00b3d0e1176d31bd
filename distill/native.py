"""CUDA/C++ facts with tree-sitter: what DeepGEMM-style kernels and pybind11 bindings do.

One parse per file (the CUDA grammar, a superset of C++), then a handful of
queries run in C; Python only classifies the captured nodes. What counts as a
TMA copy, an mbarrier or a wgmma is a table of regular expressions (`RULES`),
not code: a new construct is one row.
"""
from __future__ import annotations

import bisect
import re
from functools import lru_cache

from patterns.core.facts_types import NativeConstruct, NativeFileFacts, NativeFunctionFacts, PybindBinding

NATIVE_SUFFIXES = (".cu", ".cuh", ".cpp", ".cc", ".cxx", ".hpp", ".h", ".hh", ".inl", ".hip")

# kind (patterns.core.facts_types.NATIVE_KINDS) -> regular expression over called names,
# type names and PTX strings
RULES: dict[str, str] = {
    "tma_copy": (
        r"(^|::|\.)tma::(copy|load|store|reduce)\w*|(?i:tma_(load|store|copy|reduce)\w*)|SM\d+_TMA_\w+|"
        r"cp\.async\.bulk\.tensor|cp_async_bulk_tensor\w*|make_tma_copy\w*|(^|::)copy_nd$"
    ),
    "tma_descriptor": (
        r"TmaDescriptor|CUtensorMap\w*|cuTensorMapEncode\w*|prefetch_tma_descriptor|make_tma_\w*desc\w*|tensormap\.\w+"
    ),
    "mbarrier": r"(?i:mbarrier)|ClusterTransactionBarrier|ClusterBarrier|arrive_and_expect_tx|fence_barrier_init|expect_tx\b",
    "wgmma": r"(?i:wgmma)|warpgroup_(arrive|commit_batch|wait|fence_operand)|SM90_\d+x\d+x\d+_\w+|GMMA::",
    # tcgen05.ld/st/alloc move tensor memory (tmem), they issue no MMA
    "umma": r"tcgen05[._](mma|commit|fence|after|before|cp)\w*|UMMA::(make_\w+|MMA\w*|\w*[Dd]esc\w*)|SM100_MMA_\w+|umma_\w+",
    "mma": r"mma\.sync|(?i:\bmma_sync\b)|wmma::\w+|SM80_\d+x\d+x\d+_\w+|ldmatrix",
    "reg_realloc": r"warpgroup_reg_(alloc|dealloc)|setmaxnreg",
    "cluster": r"(?i:multicast)|cluster_(sync|arrive|wait)\w*|block_rank_in_cluster|cluster_ctarank|ClusterDim\w*",
    "pdl": (
        r"cudaGridDependencySynchronize|cudaTriggerProgrammaticLaunchCompletion|griddepcontrol|ProgrammaticStreamSerialization"
    ),
    "fp8": r"(?i:\bfp8|float_e[45]m[23]|__nv_fp8\w*|e4m3|e5m2)",
    "cp_async": r"cp\.async\.(ca|cg)|cp_async\b|__pipeline_memcpy_async|memcpy_async",
    "warp_shuffle": r"__shfl_\w*sync|__reduce_\w+_sync|redux\.sync",
    "atomic": r"\batomic(Add|CAS|Max|Min|Exch)\w*|\bred\.(global|async)|atom\.global",
    "gil_release": r"(?i:gil_?scoped_?release)|Py_BEGIN_ALLOW_THREADS|PyEval_SaveThread",
    "gil_acquire": r"(?i:gil_?scoped_?acquire)|PyGILState_Ensure",
    "scale_ue8m0": r"(?i)ue8m0",
    "blocking_wait": (
        r"cuda(Stream|Device|Event)Synchronize|(^|\.)synchronize$|sleep_for|\busleep\b|sem_wait|pthread_cond_wait|\bfutex\b"
    ),
    "tmem": r"tcgen05\.(alloc|dealloc|ld|st|cp)|tcgen05_(alloc|dealloc|ld|st)\w*|(?i:\btmem\w*)|TMEM\w*",
    "stmatrix": r"(?i:stmatrix)|STSM\w*|_STSM_",
    "ldmatrix": r"(?i:ldmatrix)|LDSM\w*|_LDSM_",
    "proxy_fence": r"fence\.proxy\.async|fence_view_async\w*|tma_store_fence|fence_proxy\w*|fence_view_async_shared",
    "named_barrier": r"NamedBarrier|(?i:named_barrier\w*)|\bbar\.(sync|arrive)\b|barrier\.(sync|arrive)\.aligned|sync_aligned\b",
    "elect_one": r"elect\.sync|(?i:elect_one\w*)",
    "prefetch": r"prefetch\.(global|tensormap)|cp\.async\.bulk\.prefetch|__prefetch\w*|(?i:prefetch_l2\w*)|(?i:l2_prefetch)",
    "fast_math": r"(ex2|rcp|tanh|lg2|rsqrt|sin|cos)\.approx|__expf\b|__exp2f|\bexp2f\b|__fdividef|__frcp\w*|__frsqrt\w*|__logf\b|__powf|(?i:fast_?exp\w*)",
    "vector_access": r"ld\.global\.(nc\.)?(L1::\w+\.)?v[248]|st\.global\.v[248]|ld\.global\.nc|\b(int4|uint4|float4|longlong2|ulonglong2)\b|__ldg\b|\bld_nc\w*|AlignedVector|\bvec_t\b",
    "memory_order": r"ld\.(acquire|relaxed|volatile)|st\.(release|relaxed|volatile)|red\.release|atom\.\w*(acquire|release|acq_rel)|__threadfence\w*|fence\.acq_rel|memory_order_\w+|cuda::atomic_ref|(?i:ld_acquire\w*|st_release\w*)",
    "ue8m0": r"(?i:ue8m0)",
    "smem_opt_in": r"cudaFuncSetAttribute|MaxDynamicSharedMemorySize|cuFuncSetAttribute|CU_FUNC_ATTRIBUTE_MAX_DYNAMIC\w*",
    "cluster_launch": r"cudaLaunchKernelEx\w*|cudaLaunchAttribute\w+|cudaLaunchConfig\w*|cuLaunchKernelEx|CU_LAUNCH_ATTRIBUTE\w+",
    "ipc": r"cudaIpc\w+|(?i:nvshmem\w*)|cuMem(Map|Export|Import|Create|SetAccess)\w*|ncclComm\w*",
    "swizzle": r"(?i:swizzle)",
    "jit_compile": r"nvrtc\w+|NVRTC\w*|cuModuleLoad\w*|cuLibraryLoad\w*|cuModuleGetFunction|cuLibraryGetKernel|\bcuLaunchKernel\b|(?i:compile_to_cubin)",
    "cvt_pack": r"cvt\.rn(\.satfinite)?\.(e4m3x2|e5m2x2|bf16x2|f16x2|e2m1x2)|__nv_cvt_\w+x2\w*|__float22bfloat162_rn|__floats2bfloat162_rn|__float22half2_rn",
    "warp_vote": r"__ballot_sync|__any_sync|__all_sync|__match_\w+_sync|__popc\w*|__activemask|vote\.sync",
    "cub": r"cub::(Block|Warp|Device)\w+",
}
_COMPILED = {k: re.compile(rx) for k, rx in RULES.items()}
# kinds a PTX instruction in inline asm can name
@lru_cache(maxsize=65536)
def _kinds_of(name: str, kinds: tuple[str, ...] | None = None) -> tuple[str, ...]:
    """The construct kinds whose rule matches a call, type or instruction name, in RULES order
    (names recur across a tree's files: std::min, uint32_t, cute::TMA::..., each tested once)."""
    return tuple(kind for kind, rx in _COMPILED.items() if (kinds is None or kind in kinds) and rx.search(name))


_ASM_KINDS = ("tma_copy", "tma_descriptor", "mbarrier", "wgmma", "umma", "mma", "reg_realloc", "cluster", "pdl", "cp_async",
              "warp_shuffle", "atomic", "tmem", "stmatrix", "ldmatrix", "proxy_fence", "named_barrier", "elect_one", "prefetch",
              "fast_math", "vector_access", "memory_order", "cvt_pack", "warp_vote")
# in a bound host function, `.wait()` / `.join()` also block (on device they are barrier waits)
_BLOCKING = re.compile(_COMPILED["blocking_wait"].pattern + r"|(^|[.:])(wait|join|get)$|recv\w*$")
_PERSISTENT_COND = re.compile(r"get_next\w*|next_(block|tile|work)\w*|fetch_next\w*|try_get\w*tile")
_GRID_STRIDE = re.compile(r"\+=\s*(gridDim\.\w|num_sms|kNumSMs|\w*num_sms\w*|\w*NumSMs\w*|\w*num_ctas\w*)")
_SCALE = re.compile(r"(?i)\b\w*(scale|sf[ab]?)\w*\b\s*(\[[^\]]*\]\s*)*\*|\*\s*\w*(scale|sf[ab]?)\w*\b")
_QUALIFIER_TOKENS = {"__global__", "__device__", "__host__", "__forceinline__", "__noinline__"}
_QUALIFIER_MACRO = re.compile(r"^(CUTLASS_\w+|CUTE_\w+|DG_\w+|__\w+__|\w*_(GLOBAL|DEVICE|HOST_DEVICE|INLINE)\w*)$")
_MAX_PER_KIND = 8

_QUERY = """
(function_definition) @function
(call_expression function: (_) @call)
(gnu_asm_expression assembly_code: (_) @asm)
(type_identifier) @type
(qualified_identifier) @qualified
(while_statement condition: (_) @while_cond) @while
(for_statement) @for
(assignment_expression) @assign
(template_declaration parameters: (template_parameter_list) @tparams) @template
(if_statement "constexpr") @if_constexpr
(preproc_include path: (_) @include)
(ERROR) @error
"""


@lru_cache(maxsize=1)
def _parser():
    import tree_sitter as ts
    import tree_sitter_cuda

    language = ts.Language(tree_sitter_cuda.language())
    return ts.Parser(language), ts.Query(language, _QUERY), ts


def _strip_templates(text: str) -> str:
    """`tma::copy<A, B<C>>` -> `tma::copy`; `x[i]->wait` -> `x.wait`."""
    out, depth = [], 0
    for ch in text:
        if ch == "<":
            depth += 1
        elif ch == ">" and depth:
            depth -= 1
        elif depth == 0:
            out.append(ch)
    name = "".join(out)
    name = re.sub(r"\[[^\]]*\]", "", name).replace("->", ".")
    name = re.sub(r"\s+", "", name).replace("template", "")
    return name.strip("*&()")


def _text(src: bytes, node) -> str:
    return src[node.start_byte:node.end_byte].decode("utf-8", "replace")


def _line(node) -> int:
    return node.start_point[0] + 1


def _function_name(src: bytes, fn) -> str:
    decl = fn.child_by_field_name("declarator")
    while decl is not None and decl.type not in ("function_declarator",):
        inner = decl.child_by_field_name("declarator")
        if inner is None:  # `T& operator=(...)`: a reference declarator names no field
            inner = next((c for c in decl.named_children if c.type.endswith("declarator")), None)
        if inner is None:
            break
        decl = inner
    if decl is not None and decl.type == "function_declarator":
        target = decl.child_by_field_name("declarator")
        if target is not None:
            return _strip_templates(_text(src, target))
    for child in fn.children:  # error-recovered definitions: first function_declarator below
        if child.type == "function_declarator":
            target = child.child_by_field_name("declarator")
            if target is not None:
                return _strip_templates(_text(src, target))
    return "<anonymous>"


def _qualifiers(src: bytes, fn) -> list[str]:
    out = []
    stack = [c for c in fn.children if c.type not in ("compound_statement", "function_declarator")]
    while stack:
        c = stack.pop(0)
        if c.type in _QUALIFIER_TOKENS:
            out.append(c.type)
        elif c.type == "launch_bounds":
            out.append("__launch_bounds__")
        elif c.type in ("type_identifier", "identifier") and _QUALIFIER_MACRO.match(_text(src, c)):
            out.append(_text(src, c))
        elif c.type in ("ERROR", "storage_class_specifier", "type_qualifier", "attribute_declaration", "attribute_specifier"):
            stack.extend(c.children)
            if c.type != "ERROR" and _text(src, c) in _QUALIFIER_TOKENS:
                out.append(_text(src, c))
    return list(dict.fromkeys(out))


def _template_params(src: bytes, fn) -> list[str]:
    parent = fn.parent
    if parent is None or parent.type != "template_declaration":
        return []
    plist = parent.child_by_field_name("parameters")
    names = []
    for p in plist.named_children if plist is not None else []:
        ident = None
        for c in p.named_children:
            if c.type in ("identifier", "type_identifier"):
                ident = c
        if ident is not None:
            names.append(_text(src, ident))
    return names


def extract_native(source: bytes, path: str = "<string>") -> NativeFileFacts:
    """Facts of one CUDA/C++ file. Never raises on odd input: tree-sitter recovers."""
    parser, query, ts = _parser()
    tree = parser.parse(source)
    # captures come back in no fixed order; source order keeps the facts (and the per-kind cap) reproducible
    caps = {name: sorted(nodes, key=lambda n: (n.start_byte, -n.end_byte)) for name, nodes in ts.QueryCursor(query).captures(tree.root_node).items()}

    # `= delete` / `= default` declare a member without code: what they mention is not used there
    declared_only = [f for f in caps.get("function", []) if f.child_by_field_name("body") is None]
    if declared_only:
        spans = [(f.start_byte, f.end_byte) for f in declared_only]
        caps = {name: [n for n in nodes if not any(a <= n.start_byte and n.end_byte <= b for a, b in spans)] for name, nodes in caps.items()}
    fns = caps.get("function", [])
    starts = [f.start_byte for f in fns]
    facts = [
        NativeFunctionFacts(
            name=_function_name(source, f), line=_line(f), end_line=f.end_point[0] + 1,
            qualifiers=_qualifiers(source, f), template_params=_template_params(source, f),
        )
        for f in fns
    ]
    calls: list[set[str]] = [set() for _ in fns]
    seen: set[tuple[int, str, str]] = set()
    counts: dict[tuple[int, str], int] = {}
    outside: list[NativeConstruct] = []

    def owner(node) -> int:
        i = bisect.bisect_right(starts, node.start_byte) - 1
        steps = 0
        while i >= 0 and steps < 64:
            if fns[i].end_byte >= node.end_byte:
                return i
            i -= 1
            steps += 1
        return -1

    def add(kind: str, name: str, node, fidx: int | None = None) -> None:
        fidx = owner(node) if fidx is None else fidx
        key = (fidx, kind, name)
        if key in seen:
            return
        if counts.get((fidx, kind), 0) >= _MAX_PER_KIND:
            return
        seen.add(key)
        counts[(fidx, kind)] = counts.get((fidx, kind), 0) + 1
        c = NativeConstruct(kind=kind, name=name[:120], line=_line(node))
        (facts[fidx].constructs if fidx >= 0 else outside).append(c)

    def classify(name: str, node, kinds: tuple[str, ...] | None = None) -> None:
        for kind in _kinds_of(name, kinds):
            add(kind, name, node)

    for node in caps.get("call", []):
        name = _strip_templates(_text(source, node))
        if not name or len(name) > 200:
            continue
        i = owner(node)
        if i >= 0:
            calls[i].add(name)
        classify(name, node)
    type_names: dict[str, object] = {}
    for node in [*caps.get("qualified", []), *caps.get("type", [])]:
        if node.parent is not None and node.parent.type == "qualified_identifier":
            continue  # the outermost qualified name is classified once
        name = _strip_templates(_text(source, node))
        if name and len(name) <= 200:
            type_names.setdefault(f"{name}@{node.start_byte}", node)
    for key, node in type_names.items():
        classify(key.rsplit("@", 1)[0], node)
    for node in caps.get("asm", []):
        text = _text(source, node)
        for instr in re.findall(r"[a-z][\w]*(?:\.[\w:]+)+", text):
            classify(instr, node, _ASM_KINDS)
    for node in caps.get("while_cond", []):
        text = _text(source, node)
        m = _PERSISTENT_COND.search(text)
        if m:
            add("persistent_loop", f"while ({m.group(0)})", node)
    for node in caps.get("for", []):
        update = node.child_by_field_name("update")
        text = _text(source, update) if update is not None else ""
        m = _GRID_STRIDE.search(text)
        if m:
            add("persistent_loop", f"for (...; {m.group(0).replace(' ', '')})", node)
    for node in caps.get("assign", []):
        op = node.child_by_field_name("operator")
        right = node.child_by_field_name("right")
        if op is None or right is None or _text(source, op) != "+=":
            continue
        if right.type == "binary_expression" and _SCALE.search(_text(source, right)):
            add("scale_promotion", _text(source, node)[:80], node)
    for node in caps.get("tparams", []):
        if _text(source, node).replace(" ", "") == "<>":
            decl = node.parent
            body = next((c for c in decl.named_children if c.start_byte != node.start_byte), None)
            label = re.split(r"[({;]", _text(source, body), maxsplit=1)[0] if body is not None else ""
            label = " ".join(label.split())[:80]
            add("template_specialization", label or "template <>", decl)
    for node in caps.get("if_constexpr", []):
        add("constexpr_dispatch", "if constexpr", node)
    for i, f in enumerate(facts):
        if "__launch_bounds__" in f.qualifiers:
            add("launch_bounds", "__launch_bounds__", fns[i], i)
        f.calls = sorted(calls[i])
        f.releases_gil = any(c.kind == "gil_release" for c in f.constructs)
        f.constructs.sort(key=lambda c: (c.line, c.kind))

    bindings = _bindings(source, caps.get("call", []), facts, fns, owner)
    return NativeFileFacts(
        language="cuda",
        functions=facts,
        bindings=bindings,
        constructs=sorted(outside, key=lambda c: c.line),
        includes=[_text(source, n).strip('"<>') for n in caps.get("include", [])],
        parse_errors=len(caps.get("error", [])),
    )


def _bindings(source: bytes, call_nodes, facts: list[NativeFunctionFacts], fns, owner) -> list[PybindBinding]:
    """pybind11 / nanobind `x.def("name", target, ..., call_guard<gil_scoped_release>())`."""
    by_name: dict[str, NativeFunctionFacts] = {}
    for f in facts:
        by_name.setdefault(f.name.rsplit("::", 1)[-1], f)

    def reach(f: NativeFunctionFacts) -> list[NativeFunctionFacts]:
        """The bound function and what it calls in this file, three levels deep."""
        out, frontier = {id(f): f}, [f]
        for _ in range(3):
            nxt = []
            for g in frontier:
                for c in g.calls:
                    h = by_name.get(c.rsplit("::", 1)[-1].rsplit(".", 1)[-1])
                    if h is not None and id(h) not in out:
                        out[id(h)] = h
                        nxt.append(h)
            frontier = nxt
        return list(out.values())
    out = []
    for node in call_nodes:
        if node.type != "field_expression":
            continue
        field = node.child_by_field_name("field")
        if field is None or _text(source, field) not in ("def", "def_static"):
            continue
        call = node.parent
        args = call.child_by_field_name("arguments")
        if args is None or not args.named_children or args.named_children[0].type != "string_literal":
            continue
        items = args.named_children
        name = _text(source, items[0]).strip('"')
        target_node = items[1] if len(items) > 1 else None
        rest = " ".join(_text(source, a) for a in items[2:])
        releases = bool(_COMPILED["gil_release"].search(rest))
        blocking: list[str] = []
        target = ""
        if target_node is not None and target_node.type == "lambda_expression":
            target = "<lambda>"
            body = _text(source, target_node)
            releases = releases or bool(_COMPILED["gil_release"].search(body))
            blocking = sorted({m.group(0) for m in re.finditer(r"[\w:.]+(?=\s*\()", body) if _BLOCKING.search(m.group(0))})
        elif target_node is not None:
            target = _strip_templates(_text(source, target_node)).lstrip("&")
            bound = by_name.get(target.rsplit("::", 1)[-1])
            if bound is not None:
                body = reach(bound)
                releases = releases or any(g.releases_gil for g in body)
                blocking = sorted({c for g in body for c in g.calls if _BLOCKING.search(c)})
        out.append(PybindBinding(name=name, target=target, line=_line(call), releases_gil=releases, blocking=blocking))
    return out
