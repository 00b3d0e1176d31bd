"""From a kernel file to ranked, explained suggestions.

Order of decisions, each made here and nowhere else:
1. facts of every kernel in the file (patterns.core.facts);
2. its bottleneck: a profile when given, else the estimate (retriever.estimate);
3. per pattern: `present_when` holds -> "already applied", never suggested;
4. the applicability gates: arch, dtype, shape conditions, bottleneck class,
   `applies_when.conditions` — a pattern failing any gate is dropped;
5. ranking of the survivors: gate strength combined with the embedding
   similarity of the kernel's description to the pattern (ChromaDB index).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from patterns.core.facts import extract_file, extract_source
from patterns.core.hardware import GPU, gpu
from patterns.core.library import Entry, load_library
from patterns.core.predicates import PREDICATES, Subject, evaluate
from patterns.retriever.estimate import DTYPE_ALIASES, LARGEST_TENSOR, STATIC_CLASSES, Analysis, estimate
from patterns.core.facts_types import FileFacts, KernelFacts
from patterns.core.records import KernelReport, SuggestReport, Suggestion
from patterns.core.schema import BottleneckClass, Condition, Pattern, Verdict

# weights of the final score: the gates decide relevance, the embedding orders near-ties
GATE_WEIGHT = 0.65
SIMILARITY_WEIGHT = 0.35
HOST_KERNEL = "<host code>"


class RetrieveError(ValueError):
    """Bad input to suggest; one line naming the file."""


def is_file_scope(cond: Condition | None) -> bool:
    """A condition made only of file-scope predicates is about host code, not one kernel."""
    if cond is None:
        return False
    if cond.op == "pred":
        return PREDICATES[cond.predicate].scope == "file"
    return all(is_file_scope(c) for c in cond.children)


@dataclass
class Gate:
    passed: bool
    strength: float
    matched: list[str]
    lines: list[int]
    reason: str = ""


def installed_triton() -> str | None:
    """The installed Triton's version, read from its metadata (importing triton costs ~1 s)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("triton")
    except PackageNotFoundError:
        return None


def triton_allows(spec: str | None, triton: str | None) -> bool:
    if not spec or not triton:
        return True
    from packaging.specifiers import SpecifierSet
    from packaging.version import InvalidVersion, Version

    try:
        return Version(triton) in SpecifierSet(spec)
    except InvalidVersion:
        return True


def gate(pattern: Pattern, subject: Subject, analysis: Analysis, hw: GPU, dtypes: set[str], shapes: dict[str, int],
         generality: float = 0.0, triton: str | None = None) -> Gate:
    """Whether the pattern applies, and how strongly: half the bottleneck match, half the code evidence.

    The code evidence of conditions that hold is how rarely they hold on the
    library's own kernels (`generality`, IDF-like): a condition true of almost
    every kernel ("not autotuned") says little about this one, a rare one
    ("an fp32 tl.dot chain at TF32") says a lot.
    """
    aw = pattern.applies_when
    if hw.vendor not in aw.arch.vendors:
        return Gate(False, 0, [], [], f"not for {hw.vendor} GPUs")
    if hw.vendor == "nvidia" and aw.arch.min_sm and hw.sm < aw.arch.min_sm:
        return Gate(False, 0, [], [], f"needs sm_{aw.arch.min_sm}+, {hw.name} is sm_{hw.sm}")
    if hw.vendor == "nvidia" and aw.arch.max_sm and hw.sm > aw.arch.max_sm:
        return Gate(False, 0, [], [], f"only up to sm_{aw.arch.max_sm}")
    if not triton_allows(aw.triton, triton):
        return Gate(False, 0, [], [], f"needs Triton {aw.triton}, assumed {triton}")
    if aw.dtypes and dtypes and not (set(DTYPE_ALIASES.get(d, d) for d in aw.dtypes) & dtypes):
        return Gate(False, 0, [], [], f"for {'/'.join(aw.dtypes)}, kernel uses {'/'.join(sorted(dtypes))}")
    given = shapes
    shapes = {**analysis.sizes, **shapes}  # sizes the launch replay derived from --input count as given
    for sc in aw.shapes:
        v = shapes.get(sc.name)
        if v is not None and ((sc.min is not None and v < sc.min) or (sc.max is not None and v > sc.max)):
            return Gate(False, 0, [], [], f"{sc.name}={v} outside [{sc.min}, {sc.max}]")
    verdict: Verdict | None = evaluate(aw.conditions, subject) if aw.conditions is not None else None
    if verdict is not None and not verdict.ok:
        return Gate(False, 0, [], [], f"condition failed: {'; '.join(verdict.reasons[:2])}")
    # numerics and host hazards are found by reading code: a pattern for them whose
    # conditions hold on this kernel is itself the detector
    static = [b for b in aw.bottlenecks if b in STATIC_CLASSES]
    strength = max(analysis.strength(b) for b in aw.bottlenecks)
    if static and verdict is not None:
        strength = max(strength, 1.0)
    if strength == 0:
        return Gate(False, 0, [], [], f"addresses {'/'.join(b.value for b in aw.bottlenecks)}, kernel is {analysis.primary.cls.value}")
    matched = [f"bottleneck {b.value}" for b in aw.bottlenecks
               if (b in analysis.classes and (analysis.measured or b in STATIC_CLASSES)) or (b in static and verdict is not None)]
    if not matched:
        matched = ["bottleneck unknown (not sized): ranked on code evidence; --shape or --input would confirm " + "/".join(b.value for b in aw.bottlenecks)]
    lines: list[int] = verdict.lines if verdict is not None else []
    cond_strength = 1.0 - generality if verdict is not None else 0.3
    if verdict is not None:
        matched += verdict.reasons
    checked = [sc for sc in aw.shapes if sc.name in shapes]
    unchecked = [sc for sc in aw.shapes if sc.name not in shapes]
    if checked:
        cond_strength = min(1.0, cond_strength + 0.2)
        matched += [f"shape {sc.name}={shapes[sc.name]}{'' if sc.name in given else ' (from the inputs)'} in [{sc.min}, {sc.max}]" for sc in checked]
    if unchecked:
        strength *= 0.85  # the pattern is for certain sizes the user did not give
        matched += [f"unchecked: {sc.name} in [{sc.min}, {sc.max}] (" + ("give the kernel's tensors with --input" if sc.name == LARGEST_TENSOR
                    else f"pass --shape {sc.name}=…") + ")" for sc in unchecked]
    return Gate(True, 0.5 * strength + 0.5 * cond_strength, matched, lines)


def expected_effect(pattern: Pattern, analysis: Analysis) -> str:
    """What this pattern could change on this kernel, from the numbers the estimate kept."""
    n = analysis.numbers
    parts = []
    cat = pattern.category.value
    t_est = n.get("t_estimate_us")
    if "bytes_if_grouped" in n and "GROUP" in (pattern.transformation.method + pattern.summary) and "bytes" in n:
        bw = n["bytes"] / max(n.get("t_memory_us", 0) or 1e-9, 1e-9)  # bytes per µs at the modelled bandwidth
        after = n["bytes_if_grouped"]
        verdict = ("compute-bound either way: little to gain" if n.get("t_compute_us", 0) >= max(n["t_memory_us"], after / bw)
                   else f"memory time {n['t_memory_us']:.1f} → {after / bw:.1f} µs")
        parts.append(f"grouped order (GROUP_M=8): DRAM traffic {n['bytes'] / 1e6:.1f} → {after / 1e6:.1f} MB through L2 tile reuse; {verdict}")
    for b in pattern.applies_when.bottlenecks:
        if b not in analysis.classes or parts and b == BottleneckClass.memory:
            continue
        if not analysis.measured and b not in STATIC_CLASSES:
            continue  # the unsized guess is no effect to promise
        if b == BottleneckClass.occupancy and "sm_fill" in n:
            fill = n["sm_fill"]
            gain = f"; filling the SMs can cut time by up to {1 / fill:.1f}×" if fill < 1 else ""
            parts.append(f"grid of {int(n['programs'])} programs fills {fill:.0%} of {int(n['sm_count'])} SMs ({n['waves']} waves){gain}")
        elif b == BottleneckClass.memory and "bytes" in n:
            how = {"fusion": "a fused intermediate skips one write and one read of it",
                   "quantization": "narrower elements cut the bytes in proportion",
                   "launch-scheduling": "overlapping prologue and epilogue hides part of it",
                   "compute": "tensor-core paths move the same bytes with fewer instructions"}.get(
                cat, "gains come from fewer bytes or higher achieved bandwidth")
            parts.append(f"memory-bound: {n['bytes'] / 1e6:.2f} MB per launch = {n['t_memory_us']} µs at the measured bandwidth; {how}")
        elif b == BottleneckClass.compute and "flops" in n:
            parts.append(f"compute-bound: {n['flops'] / 1e9:.2f} GFLOP per launch = {n['t_compute_us']} µs at peak"
                         + (f" of {t_est} µs estimated" if t_est else ""))
        elif b == BottleneckClass.launch and "t_estimate_us" in n:
            parts.append(f"~{n['t_estimate_us']} µs of work per launch against ~{n['launch_overhead_us']} µs launch overhead")
        else:
            bn = next((x for x in [analysis.primary, *analysis.others] if x.cls == b), None)
            if bn and bn.rationale:
                parts.append(bn.rationale[0])
    best = max(pattern.evidence.measured, key=lambda m: m.ratio, default=None)
    if best is not None:
        parts.append(f"measured {best.ratio:.2f}× ({best.metric}) on {best.hardware}, {best.shapes}")
    return "; ".join(parts)


def generality(entries: list[Entry]) -> dict[str, float]:
    """Fraction of the library's before.py kernels on which each pattern's conditions hold.

    Computed from the library itself (no user data): a condition that holds on
    almost every kernel ("has a loop", "not autotuned") carries little evidence.
    """
    subjects = []
    for e in entries:
        try:
            f = extract_file(e.file("before.py"))
        except Exception:  # a broken example is `patterns check`'s business, not ranking's
            continue
        subjects += [Subject(f, k) for k in f.kernels] or [Subject(f, None)]
    out = {}
    for e in entries:
        cond = e.pattern.applies_when.conditions
        if cond is None or not subjects:
            out[e.id] = 1.0
            continue
        out[e.id] = sum(evaluate(cond, s).ok for s in subjects) / len(subjects)
    return out


def describe_kernel(kernel: KernelFacts | None, analysis: Analysis, facts: FileFacts | None = None) -> str:
    """The text embedded as the query: the code's own words, the bottleneck, the kernel's shape of work."""
    words = []
    if facts is not None and facts.docstring:
        words.append(facts.docstring)
    if kernel is not None and kernel.docstring:
        words.append(kernel.docstring)
    words += [f"{analysis.primary.cls.value} kernel", *analysis.primary.rationale]
    words += [b.cls.value + ": " + "; ".join(b.rationale) for b in analysis.others]
    if kernel is not None:
        names = sorted({c.name for c in kernel.calls if c.name.startswith("tl.")})
        words.append("uses " + ", ".join(names))
        if kernel.loops:
            words.append(f"{len(kernel.loops)} loops")
        words.append(kernel.name.replace("_", " "))
    return ". ".join(words)


def _dtypes(kernel: KernelFacts | None, dtype: str, overrides: dict[str, str]) -> set[str]:
    out = {DTYPE_ALIASES.get(dtype, dtype)} | {DTYPE_ALIASES.get(v, v) for v in overrides.values()}
    if kernel is not None:
        out |= {d for d in kernel.dtypes.values() if d.startswith(("float", "bfloat"))}
        for c in kernel.calls_named("tl.dot"):
            out |= {d for d in c.operand_dtypes if d}
    return out


def _suggestion(entry: Entry, kernel: str, score: float, g: Gate | None, effect: str, applied: bool, verdict: Verdict | None = None) -> Suggestion:
    p = entry.pattern
    return Suggestion(
        pattern_id=p.id,
        title=p.title,
        kernel=kernel,
        score=round(score, 4),
        matched=(g.matched if g else []) if not applied else (verdict.reasons if verdict else []),
        lines=(g.lines if g else []) if not applied else (verdict.lines if verdict else []),
        expected_effect=effect,
        safety=p.safety,
        upstream=p.evidence.upstream,
        measured=p.evidence.measured,
        rewrite=p.transformation.rewrite,
        already_applied=applied,
    )


def known_names(facts: FileFacts, kernel: KernelFacts) -> set[str]:
    """Names `--shape` and `--input` may give for a kernel: its parameters, and the launcher's own names."""
    from patterns.retriever.launcher import free_names

    names = {p.name for p in kernel.params}
    if kernel.autotune:
        names |= {k for cfg in kernel.autotune.configs for k in cfg if k != "source"}
    for la in kernel.launches:
        assigns = facts.host_assigns.get(la.function, {})
        names |= set(assigns)
        for text in [e for _, e in assigns.values()] + la.args + list(la.kwargs.values()) + [la.grid]:
            names |= set(free_names(text, {}))
    return names


def check_names(path: Path, facts: FileFacts, targets: list[KernelFacts], entries: list[Entry], given: dict, flag: str) -> None:
    """Reject names no kernel of the file (nor any pattern's shape condition) uses, listing the known ones."""
    if not given or not targets:
        return
    known = set().union(*(known_names(facts, k) for k in targets))
    pattern_names = {sc.name for e in entries for sc in e.pattern.applies_when.shapes}
    unknown = sorted(n for n in given if n not in known and n not in pattern_names)
    if unknown:
        shown = sorted(known, key=str.lower)
        listed = ", ".join(shown[:40]) + (f", … (+{len(shown) - 40})" if len(shown) > 40 else "")
        raise RetrieveError(f"{path}: {flag}: no kernel or launcher uses {', '.join(unknown)} (known: {listed or 'none'})")


def analyse(
    facts: FileFacts,
    kernel: KernelFacts | None,
    hw: GPU,
    shapes: dict[str, int],
    dtype: str,
    overrides: dict[str, str],
    profile: Path | None,
    inputs: dict | None = None,
) -> Analysis:
    if kernel is None:
        from patterns.retriever.estimate import host_analysis

        return host_analysis(facts, hw)
    analysis = estimate(facts, kernel, hw, shapes, dtype, overrides, inputs)
    if profile is not None:
        from patterns.retriever.profile import apply_profile

        analysis = apply_profile(analysis, profile, kernel.name)
    return analysis


def suggest(
    path: Path,
    *,
    source: str | None = None,
    kernel: str | None = None,
    shapes: dict[str, int] | None = None,
    arch: str = "h200",
    dtype: str = "bfloat16",
    dtype_overrides: dict[str, str] | None = None,
    profile: Path | None = None,
    top: int = 5,
    chroma_url: str | None = None,
    index_dir: Path | None = None,
    entries: list[Entry] | None = None,
    progress=None,
    inputs: dict | None = None,
    triton: str | None = None,
    strict_names: bool = True,
) -> SuggestReport:
    """`strict_names=False` (one file of many): names this file does not use are dropped, not refused."""
    triton = triton or installed_triton()
    shapes = dict(shapes or {})
    inputs = dict(inputs or {})
    overrides = dict(dtype_overrides or {})
    hw = gpu(arch)
    # `source` stands for the file's text (an editor's unsaved buffer, a kernel an agent holds)
    facts = extract_source(source, str(path)) if source is not None else extract_file(path)
    entries = entries if entries is not None else load_library()
    file_subject = Subject(facts, None)
    host_patterns = [e for e in entries if is_file_scope(e.pattern.applies_when.conditions)]
    kernel_patterns = [e for e in entries if e not in host_patterns]

    # @triton.jit device functions (called from kernels, returning values) are analysed through their callers
    targets: list[KernelFacts | None] = [k for k in facts.kernels if not k.device_function]
    if kernel is not None:
        targets = [k for k in facts.kernels if k.name == kernel]
        if not targets:
            known = ", ".join(k.name for k in facts.kernels) or "none"
            raise RetrieveError(f"{path}: --kernel: no kernel named '{kernel}' (kernels: {known})")
    kernels_given = [k for k in targets if k is not None]
    if not strict_names and kernels_given:
        known = set().union(*(known_names(facts, k) for k in kernels_given)) | {sc.name for e in entries for sc in e.pattern.applies_when.shapes}
        shapes = {n: v for n, v in shapes.items() if n in known}
        inputs = {n: v for n, v in inputs.items() if n in known}
    check_names(path, facts, kernels_given, entries, shapes, "--shape")
    check_names(path, facts, kernels_given, [], inputs, "--input")
    host = analyse(facts, None, hw, shapes, dtype, overrides, None)
    host_relevant = host.primary.cls == BottleneckClass.host or any(
        evaluate(e.pattern.present_when, file_subject).ok for e in host_patterns
    )
    if host_relevant:
        targets.append(None)
    if not targets:
        raise RetrieveError(f"{path}: no @triton.jit kernel found (and no host-side hazard to analyse)")

    if overrides:
        from patterns.retriever.estimate import unknown_overrides

        kernels_ = [k for k in targets if k is not None]
        unknown = set(overrides)
        for k in kernels_:
            unknown &= set(unknown_overrides(k, overrides))
        if kernels_ and unknown:
            raise RetrieveError(f"{path}: --dtype: no kernel parameter or launcher argument named {', '.join(sorted(unknown))}")
    analyses = [(k, analyse(facts, k, hw, shapes, dtype, overrides, profile, inputs)) for k in targets]
    queries = [describe_kernel(k, a, facts) for k, a in analyses]
    sims: dict[int, dict[str, float]] = {}
    general: dict[str, float] = {}
    if entries:
        from patterns.retriever.index import ranking_data

        sim_rows, general = ranking_data(queries, entries, chroma_url=chroma_url, path=index_dir, progress=progress)
        sims = dict(enumerate(sim_rows))

    reports = []
    for i, (k, analysis) in enumerate(analyses):
        subject = Subject(facts, k) if k is not None else file_subject
        pool = kernel_patterns if k is not None else host_patterns
        suggestions, applied = [], []
        for entry in pool:
            p = entry.pattern
            present = evaluate(p.present_when, subject)
            sim = sims.get(i, {}).get(p.id, 0.0)
            if present.ok:
                applied.append(_suggestion(entry, k.name if k else HOST_KERNEL, 1.0, None, "", True, present))
                continue
            g = gate(p, subject, analysis, hw, _dtypes(k, dtype, {**overrides, **{n: t.dtype for n, t in inputs.items()}}), shapes, general.get(p.id, 0.0), triton)
            if not g.passed:
                continue
            score = GATE_WEIGHT * g.strength + SIMILARITY_WEIGHT * max(0.0, sim)
            suggestions.append(_suggestion(entry, k.name if k else HOST_KERNEL, score, g, expected_effect(p, analysis), False))
        suggestions.sort(key=lambda s: (-s.score, s.pattern_id))
        reports.append(
            KernelReport(
                kernel=k.name if k else HOST_KERNEL,
                path=str(path),
                line=k.line if k else 1,
                gpu=hw.name,
                bottleneck=analysis.primary,
                other_bottlenecks=analysis.others,
                suggestions=suggestions[:top],
                already_applied=applied,
            )
        )
    return SuggestReport(file=str(path), gpu=hw.name, shapes=shapes, profile=str(profile) if profile else None, triton=triton,
                         inputs={n: "x".join(map(str, t.shape)) + ":" + t.dtype for n, t in inputs.items()}, kernels=reports)
