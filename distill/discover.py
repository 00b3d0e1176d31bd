"""Discovery: facts that recur across upstream kernels but match no library pattern.

Each unmatched kernel (Python @triton.jit kernel or CUDA __global__ function) is
reduced to a *signature*: its distinctive Triton calls, loop kinds, decorators,
descriptor use and native constructs. Features present in most kernels
(tl.load, tl.arange, ...) say nothing and are dropped by document frequency.
Frequent feature sets (pairs, extended to triples while they keep their support)
are picked greedily, most kernels x most features first, skipping sets whose
kernels are mostly covered already. Each becomes a Draft whose `present_when`
is the signature written as library predicates -- it runs like any pattern's.
"""
from __future__ import annotations

import itertools
import re
from collections import Counter, defaultdict
from dataclasses import dataclass

from patterns.distill.detect import KNOWN_PROJECTS
from patterns.distill.scan import FileRecord
from patterns.core.facts_types import KernelFacts, NativeFunctionFacts
from patterns.core.records import Draft
from patterns.core.schema import Category, Condition, PatternEvidence, UpstreamLocation

MAX_DF = 0.35  # a feature in more than this share of kernels is not distinctive
_NOISE = {"tl.program_id", "tl.arange", "tl.load", "tl.store", "tl.zeros", "tl.where", "tl.full", "tl.cdiv", "tl.num_programs", "tl.static_assert", "tl.multiple_of", "tl.max_contiguous", "tl.constexpr", "tl.device_assert", "tl.static_print"}
_CATEGORY_RULES: list[tuple[str, Category]] = [
    (r"atomic|cuda:cluster", Category.parallelism),
    (r"dot|wgmma|umma|mma|cuda:scale_promotion", Category.compute),
    (r"fp8|int8|quant", Category.quantization),
    (r"desc|tma|cp_async|block_ptr|cuda:mbarrier|num_stages", Category.memory),
    (r"tl\.(sum|max|min|reduce|cumsum|associative_scan)", Category.fusion),
    (r"exp|log|sqrt|rsqrt|sigmoid|fma|precision", Category.numerics),
]


@dataclass
class Item:
    project: str
    version: str
    path: str
    symbol: str
    lines: tuple[int, int]
    sha256: str
    features: frozenset[str]


def python_features(k: KernelFacts) -> set[str]:
    f = {f"call:{c.name}" for c in k.calls if c.name.startswith(("tl.", "libdevice.")) and c.name not in _NOISE}
    f |= {f"loop:{lp.kind}" for lp in k.loops if lp.kind in ("tl.range", "tl.static_range", "while")}
    if any(lp.num_stages is not None or "num_stages" in lp.kwargs for lp in k.loops):
        f.add("loop_num_stages")
    if k.autotune is not None:
        f.add("autotune")
    if k.heuristics:
        f.add("heuristics")
    f |= {f"jit:{key}" for key in k.jit_kwargs}
    if any(c.receiver.endswith(("make_tensor_descriptor", "TensorDescriptor")) for c in k.calls):
        f.add("desc")
    if any(c.first_arg_origin in ("tl.make_block_ptr", "tl.advance") for c in k.calls):
        f.add("block_ptr")
    for c in k.calls_named("tl.dot"):
        if "input_precision" in c.kwargs:
            f.add("dot:explicit_precision")
    return f


def native_features(fn: NativeFunctionFacts) -> set[str]:
    return {f"cuda:{c.kind}" for c in fn.constructs if c.kind not in ("constexpr_dispatch", "launch_bounds")}


def feature_condition(feature: str) -> object:
    kind, _, arg = feature.partition(":")
    if kind == "call":
        return {"calls": {"name": [arg]}}
    if kind == "loop":
        return {"loop": {"kind": [arg]}}
    if kind == "loop_num_stages":
        return {"loop": {"num_stages_set": True}}
    if kind == "autotune":
        return "autotuned"
    if kind == "heuristics":
        return "heuristics"
    if kind == "jit":
        return {"jit_option": {"name": arg}}
    if kind == "desc":
        return {"memory_access": {"via": "tensor_descriptor"}}
    if kind == "block_ptr":
        return {"memory_access": {"via": "block_ptr"}}
    if kind == "dot":
        return {"dot": {"precision": ["tf32x3", "ieee", "explicit", "bf16x3", "bf16x6", "tf32"]}}
    if kind == "cuda":
        return {"native_construct": {"kinds": [arg]}}
    raise ValueError(f"unknown feature {feature}")


def items(project: str, version: str, records: list[FileRecord], matched: set[tuple[str, str, str]]) -> list[Item]:
    out = []
    for rec in records:
        if rec.py is not None:
            for k in rec.py.facts.kernels:
                if (project, rec.path, k.name) in matched or not k.calls:
                    continue
                out.append(Item(project, version, rec.path, k.name, (k.line, k.end_line), rec.sha256, frozenset(python_features(k))))
        elif rec.native is not None:
            for fn in rec.native.functions:
                if not fn.is_kernel or (project, rec.path, fn.name) in matched:
                    continue
                out.append(Item(project, version, rec.path, fn.name, (fn.line, fn.end_line), rec.sha256, frozenset(native_features(fn))))
    return out


def _slug(features: tuple[str, ...]) -> str:
    words = []
    for f in features:
        w = f.split(":", 1)[-1].removeprefix("tl.").removeprefix("libdevice.")
        words.append(re.sub(r"[^a-z0-9]+", "_", w.lower()).strip("_"))
    return "draft_" + "__".join(words)[:80].strip("_")


def _title(features: tuple[str, ...]) -> str:
    names = [f.split(":", 1)[-1] for f in features]
    return "Upstream kernels combining " + ", ".join(names[:-1]) + (" and " if len(names) > 1 else "") + names[-1]


def _category(features: tuple[str, ...]) -> Category:
    text = " ".join(features)
    for rx, cat in _CATEGORY_RULES:
        if re.search(rx, text):
            return cat
    return Category.compute


def cluster(all_items: list[Item], min_support: int = 4, max_drafts: int = 10, cap: int = 5) -> list[Draft]:
    if not all_items:
        return []
    df = Counter(f for it in all_items for f in it.features)
    n = len(all_items)
    # document frequency only means something over a real corpus (a whole wheel)
    keep = {f for f, c in df.items() if c >= min_support and (n < 50 or c / n <= MAX_DF)}
    sigs = [frozenset(f for f in it.features if f in keep) for it in all_items]
    pairs: dict[tuple[str, ...], list[int]] = defaultdict(list)
    for i, s in enumerate(sigs):
        for p in itertools.combinations(sorted(s), 2):
            pairs[p].append(i)
    candidates: dict[tuple[str, ...], list[int]] = {p: ix for p, ix in pairs.items() if len(ix) >= min_support}
    # extend the strongest pairs by a third feature while they keep 80% of their support
    for p, ix in sorted(candidates.items(), key=lambda kv: -len(kv[1]))[:200]:
        extra = Counter(f for i in ix for f in sorted(sigs[i]) if f not in p)  # sorted: ties go the same way every run
        for f, c in extra.most_common(1):
            if c >= max(min_support, int(0.8 * len(ix))):
                triple = tuple(sorted((*p, f)))
                candidates[triple] = [i for i in ix if f in sigs[i]]
    chosen: list[tuple[tuple[str, ...], list[int]]] = []
    covered: set[int] = set()
    for feats, ix in sorted(candidates.items(), key=lambda kv: (-len(kv[1]) * len(kv[0]), kv[0])):
        if len(chosen) >= max_drafts:
            break
        fresh = [i for i in ix if i not in covered]
        if len(fresh) < max(min_support, len(ix) // 2):
            continue
        chosen.append((feats, ix))
        covered.update(ix)
    drafts = []
    for feats, ix in chosen:
        members = [all_items[i] for i in ix]
        support = Counter(m.project for m in members)
        upstream = []
        for project in sorted(support):
            per = sorted((m for m in members if m.project == project), key=lambda m: (m.path, m.lines[0]))
            seen_paths: set[str] = set()
            for m in [*[x for x in per if not (x.path in seen_paths or seen_paths.add(x.path))], *per]:
                if len([u for u in upstream if u.project == project]) >= cap or project not in KNOWN_PROJECTS:
                    break
                if any(u.path == m.path and u.symbol == m.symbol for u in upstream):
                    continue
                upstream.append(UpstreamLocation(project=project, version=m.version, path=m.path, symbol=m.symbol, lines=m.lines,
                                                 note="found by distill (draft cluster)", sha256=m.sha256))
        cond = Condition.model_validate({"all": [feature_condition(f) for f in feats]})
        drafts.append(Draft(
            id=_slug(feats), title=_title(feats), category=_category(feats), present_when=cond,
            evidence=PatternEvidence(upstream=upstream), tags=[f.split(":", 1)[-1] for f in feats],
            signature=list(feats), support=dict(support),
        ))
    return drafts
