"""Discovery: upstream techniques the library lacks, as draft skeletons.

Every technique feature of patterns.distill.techniques is evaluated, with the
library's predicates, on every upstream subject of its scope: each Triton
kernel, each C++/CUDA function, each Python file's host code. Where it holds is
its *support* (one location per kernel or function); the share of the scope's
subjects where it holds is its *contrast* (low: distinctive). A candidate becomes
a draft when it has support in at least `min_support` places in two files, is
held by at most `max_share` of its scope, is not the same technique as a
library pattern (the same condition, or nearly the same locations) or as a
stronger candidate; candidates are ranked by support and distinctiveness.

A draft is a full skeleton (patterns.core.records.Draft): id, category,
`present_when` (the feature's condition: it holds on every location by
construction), `applies_when` from what the locations share (bottleneck class,
dtypes, architecture), resource limits from the tile sizes, warps, stages and
template parameters seen there, a safety guess from what the technique changes,
and every location with project, version, path, symbol, lines and what the code
does there. Only prose is left: summary, why and transformation.
"""
from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from patterns.distill.detect import KNOWN_PROJECTS, Detections, check
from patterns.distill.scan import FileRecord
from patterns.distill.techniques import BY_ID, TECHNIQUES, Technique
from patterns.core.facts_types import FileFacts, KernelFacts, NativeFileFacts
from patterns.core.predicates import Subject
from patterns.core.records import Draft
from patterns.core.schema import (
    AppliesWhen, ArchCondition, BottleneckClass, Condition, PatternEvidence, ResourceLimits, UpstreamLocation,
)

MAX_SHARE = 0.35  # a feature held by more of its scope is not distinctive
SAME_AS = 0.6  # Jaccard of locations above which two techniques are the same one
_CODE_SPAN = re.compile(r"`[^`]*`")
_BLOCK = re.compile(r"^(B[A-Z]{0,2}|BLOCK(_SIZE)?_?[A-Z]*|CHUNK_SIZE|BLOCK)$")
_DTYPES = {"float8": "float8", "fp8": "float8", "e4m3": "float8", "e5m2": "float8", "bfloat16": "bfloat16", "bf16": "bfloat16",
           "float16": "float16", "fp16": "float16", "half": "float16", "int8": "int8", "float32": "float32"}


@dataclass
class Loc:
    project: str
    version: str
    path: str
    symbol: str
    lines: tuple[int, int]
    sha256: str
    line: int  # first matched line
    reason: str
    facts: dict = field(default_factory=dict)  # what resource limits and applies_when are estimated from

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.project, self.path, self.symbol)


@dataclass
class Mined:
    """One project's technique locations and the size of each scope (cached with the analysis)."""

    project: str
    version: str
    subjects: Counter = field(default_factory=Counter)  # scope -> subjects evaluated
    hits: dict[str, list[Loc]] = field(default_factory=dict)  # technique id -> locations


def _kernel_facts(k: KernelFacts) -> dict:
    blocks: dict[str, set[str]] = {}
    for p in k.params:
        if p.constexpr and _BLOCK.match(p.name) and p.default and p.default.isdigit():
            blocks.setdefault(p.name, set()).add(p.default)
    warps, stages = set(), set()
    if k.autotune is not None:
        for cfg in k.autotune.configs:
            for name, v in cfg.items():
                v = v.strip()
                if name == "num_warps" and v.isdigit():
                    warps.add(v)
                elif name == "num_stages" and v.isdigit():
                    stages.add(v)
                elif _BLOCK.match(name) and v.isdigit():
                    blocks.setdefault(name, set()).add(v)
    for la in k.launches:
        for name, v in la.kwargs.items():
            if name == "num_warps" and v.isdigit():
                warps.add(v)
            elif name == "num_stages" and v.isdigit():
                stages.add(v)
    text = " ".join([*k.dtypes.values(), *(d for c in k.calls for d in c.operand_dtypes), *(a for c in k.calls if c.name.endswith("to") for a in c.args)])
    dtypes = sorted({v for key, v in _DTYPES.items() if key in text.lower()})
    return {"blocks": {b: sorted(v, key=int) for b, v in blocks.items()}, "num_warps": sorted(warps, key=int),
            "num_stages": sorted(stages, key=int), "dtypes": dtypes, "native": False}


def _native_facts(fn) -> dict:
    kinds = sorted({c.kind for c in fn.constructs})
    dtypes = ["float8"] if "fp8" in kinds else []
    tparams = [t for t in fn.template_params if re.search(r"(?i)stage|block|tile|thread|warp|cluster|multicast|BLOCK_[MNK]", t)]
    return {"kinds": kinds, "template_params": tparams, "launch_bounds": "__launch_bounds__" in fn.qualifiers,
            "dtypes": dtypes, "native": True, "kernel": fn.is_kernel}


def _note(t: Technique, reason: str, line: int) -> str:
    """What the code does there, in words: the technique's description and the matched construct, no quoted code."""
    detail = _CODE_SPAN.sub("", reason)
    detail = re.sub(r"\(line[^)]*\)|:\s*$|\s+", " ", detail).strip(" :;,")
    detail = re.sub(r"\s+,", ",", detail)
    text = f"{t.does} (line {line}"
    if detail and len(detail) < 90:
        text += f"; {detail}"
    return (text + ")")[:240]


def _views(nat: NativeFileFacts, facts: FileFacts):
    for fn in nat.functions:
        if fn.constructs or fn.is_kernel:
            sub = NativeFileFacts(language=nat.language, functions=[fn], includes=nat.includes,
                                  bindings=[b for b in nat.bindings if fn.line <= b.line <= fn.end_line])
            yield fn, facts.model_copy(update={"native": sub})


def _safe(cond: Condition, subject: Subject, memo: dict):
    try:
        return check(cond, subject, memo)
    except Exception:  # a predicate that trips on unusual upstream facts must not stop the run
        return None


def mine(project: str, version: str, records: list[FileRecord], techniques: list[Technique] | None = None) -> Mined:
    """Evaluate every technique on every subject of its scope in one project's facts."""
    rows = techniques or TECHNIQUES
    conds = {t.id: Condition.model_validate(t.when) for t in rows}
    by_scope: dict[str, list[Technique]] = {}
    for t in rows:
        by_scope.setdefault(t.scope, []).append(t)
    out = Mined(project, version)

    def add(t: Technique, loc: Loc) -> None:
        out.hits.setdefault(t.id, []).append(loc)

    for rec in records:
        if rec.py is not None:
            facts = rec.py.facts
            starts = {s.name: s.line for s in rec.py.symbols}
            for k in facts.kernels:
                out.subjects["kernel"] += 1
                start = min(starts.get(k.name, k.line), k.autotune.line if k.autotune else k.line, k.line)
                kf = None
                subject, memo = Subject(facts, k), {}
                for t in by_scope.get("kernel", []):
                    v = _safe(conds[t.id], subject, memo)
                    if v is None or not v.ok:
                        continue
                    kf = kf or _kernel_facts(k)
                    line = min([ln for ln in v.lines if start <= ln <= k.end_line] or [k.line])
                    add(t, Loc(project, version, rec.path, k.name, (start, k.end_line), rec.sha256, line, (v.reasons or [""])[0], kf))
            out.subjects["host"] += 1
            subject, memo = Subject(facts, None), {}
            for t in by_scope.get("host", []):
                v = _safe(conds[t.id], subject, memo)
                if v is None or not v.ok:
                    continue
                reason = (v.reasons or [""])[0]
                lines = list(v.lines) or [1]  # a table has no lines: locate() finds where it is bound
                sym = next((s for s in rec.py.symbols if s.line <= min(lines) <= s.end_line), None)
                span = (sym.line, sym.end_line) if sym else (min(lines), max(lines))
                add(t, Loc(project, version, rec.path, sym.name if sym else "<module>", span, rec.sha256, min(lines), reason, {"native": False}))
        elif rec.native is not None:
            whole = FileFacts(path=rec.path, lines=rec.lines, native=rec.native)
            for fn, view in _views(rec.native, whole):
                out.subjects["native"] += 1
                nf = None
                subject, memo = Subject(view, None), {}
                for t in by_scope.get("native", []):
                    v = _safe(conds[t.id], subject, memo)
                    if v is None or not v.ok:
                        continue
                    nf = nf or _native_facts(fn)
                    line = min([ln for ln in v.lines if fn.line <= ln <= fn.end_line] or [fn.line])
                    add(t, Loc(project, version, rec.path, fn.name, (fn.line, fn.end_line), rec.sha256, line, (v.reasons or [""])[0], nf))
    return out


def locate(m: Mined, read: Callable[[str], str]) -> None:
    """Module-level tables carry no line facts: find the line that binds each one in the file's text."""
    for locs in m.hits.values():
        for loc in locs:
            hit = re.match(r"dispatch table (\w+)", loc.reason)
            if not hit or loc.symbol != "<module>":
                continue
            text = read(loc.path)
            bound = re.search(rf"^{re.escape(hit.group(1))}\s*(:[^=\n]*)?=", text, re.M)
            if bound:
                a = text.count("\n", 0, bound.start()) + 1
                end = text.find("\n}", bound.start())
                b = a + text.count("\n", bound.start(), end + 2) if end > 0 else a
                loc.lines, loc.line = (a, max(a, b)), a


def merge(parts: list[Mined]) -> Mined:
    out = Mined(parts[0].project, parts[0].version)
    for p in parts:
        out.subjects.update(p.subjects)
        for tid, locs in p.hits.items():
            out.hits.setdefault(tid, []).extend(locs)
    return out


# -- from mined locations to drafts ------------------------------------------------------------


@dataclass
class Candidate:
    technique: Technique
    locs: list[Loc]
    subjects: int  # of its scope, over all projects
    library_overlap: dict[str, float] = field(default_factory=dict)  # library pattern -> Jaccard
    dropped: str = ""

    @property
    def share(self) -> float:
        return len(self.locs) / self.subjects if self.subjects else 0.0

    @property
    def score(self) -> float:
        return math.log1p(len(self.locs)) * math.log1p(len({l.path for l in self.locs})) * (1.0 - self.share)


_GENERIC = {"in", "of", "the", "with", "by", "and", "kernel", "kernels", "fused", "fusion", "autotune", "config", "configs", "upstream"}


def _stems(name: str) -> set[str]:
    """Words of an id, cut to five letters (offsets/offset, indexing/indirect stay apart only past 'index')."""
    return {w[:5] for w in re.split(r"[_\W]+", name.lower()) if w and w not in _GENERIC}


def _overlap(a: set, b: set) -> float:
    return len(a & b) / min(len(a), len(b)) if a and b else 0.0


def _jaccard(a: set, b: set) -> float:
    return len(a & b) / len(a | b) if a and b else 0.0


def _branches(cond: Condition) -> list[str]:
    out = [json.dumps(cond.to_yaml(), sort_keys=True)]
    if cond.op == "any":
        out += [json.dumps(c.to_yaml(), sort_keys=True) for c in cond.children]
    return out


def candidates(mined: list[Mined], entries, det: Detections | None, min_support: int = 3, max_share: float = MAX_SHARE) -> list[Candidate]:
    """Every technique with its locations, ranked; `dropped` says why one is not proposed."""
    subjects = Counter()
    for m in mined:
        subjects.update(m.subjects)
    library: dict[str, set] = {}
    for h in det.hits if det is not None else []:
        library.setdefault(h.pattern, set()).add((h.project, h.path, h.symbol))
    same_condition = {b: e.id for e in entries for b in _branches(e.pattern.present_when)}
    out = []
    for t in TECHNIQUES:
        locs = [loc for m in mined for loc in m.hits.get(t.id, [])]
        c = Candidate(t, locs, subjects[t.scope])
        keys = {loc.key for loc in locs}
        c.library_overlap = {pid: round(j, 2) for pid, s in library.items() if (j := _jaccard(keys, s)) >= 0.2}
        cond = json.dumps(Condition.model_validate(t.when).to_yaml(), sort_keys=True)
        if cond in same_condition:
            c.dropped = f"the library has it: {same_condition[cond]} has the same condition"
        elif any(j >= SAME_AS for j in c.library_overlap.values()):
            pid = max(c.library_overlap, key=c.library_overlap.get)
            c.dropped = f"the library has it: {pid} holds on nearly the same locations (Jaccard {c.library_overlap[pid]})"
        elif named := next((pid for pid, s in library.items() if len(_stems(pid) & _stems(t.id)) >= 2 and _overlap(keys, s) >= 0.3), None):
            c.dropped = (f"the library has it: {named} names the same technique and holds on "
                         f"{_overlap(keys, library[named]):.0%} of the smaller set of locations")
        elif len(locs) < min_support:
            c.dropped = f"support {len(locs)} < {min_support}"
        elif len({loc.path for loc in locs}) < 2:
            c.dropped = "support in one file only"
        elif c.share > max_share and c.subjects >= 50:  # a share means something over a real corpus only
            c.dropped = f"held by {c.share:.0%} of its scope (not distinctive)"
        out.append(c)
    out.sort(key=lambda c: (-c.score, c.technique.id))
    kept: list[Candidate] = []
    for c in out:
        if c.dropped:
            continue
        keys = {loc.key for loc in c.locs}
        twin = next((k for k in kept if _jaccard(keys, {loc.key for loc in k.locs}) >= SAME_AS), None)
        if twin is not None:
            c.dropped = f"the same locations as {twin.technique.id}"
            continue
        kept.append(c)
    return out


def _pick(locs: list[Loc], cap: int) -> list[Loc]:
    """Up to `cap` locations per project: one per file first, in path order."""
    out: list[Loc] = []
    for project in sorted({l.project for l in locs}):
        per = sorted((l for l in locs if l.project == project), key=lambda l: (l.path, l.lines[0]))
        seen: set[str] = set()
        first = [l for l in per if not (l.path in seen or seen.add(l.path))]
        chosen: list[Loc] = []
        for l in [*first, *per]:
            if len(chosen) >= cap:
                break
            if l not in chosen:
                chosen.append(l)
        out += chosen
    return out


def _range(values: list[str]) -> str:
    nums = sorted({int(v) for v in values})
    return str(nums[0]) if len(nums) == 1 else f"{nums[0]}-{nums[-1]}"


def _limits(c: Candidate) -> ResourceLimits:
    py = [l.facts for l in c.locs if not l.facts.get("native")]
    nat = [l.facts for l in c.locs if l.facts.get("native")]
    reg, smem, notes = [], [], [f"estimated by the distiller from {len(c.locs)} upstream locations; check before accepting"]
    blocks: dict[str, list[str]] = {}
    warps, stages = [], []
    for f in py:
        for b, v in f.get("blocks", {}).items():
            blocks.setdefault(b, []).extend(v)
        warps += f.get("num_warps", [])
        stages += f.get("num_stages", [])
    if warps:
        reg.append(f"num_warps {_range(warps)} upstream")
    if stages:
        smem.append(f"num_stages {_range(stages)} upstream (shared memory grows with stages x tile)")
    if blocks:
        common = sorted(blocks, key=lambda b: -len(blocks[b]))[:4]
        notes.append("tile sizes seen upstream: " + ", ".join(f"{b} {_range(blocks[b])}" for b in common))
    if nat:
        lb = sum(1 for f in nat if f.get("launch_bounds"))
        if lb:
            reg.append(f"__launch_bounds__ on {lb} of {len(nat)} functions")
        tp = Counter(t for f in nat for t in f.get("template_params", []))
        if tp:
            notes.append("compile-time sizes as template parameters: " + ", ".join(n for n, _ in tp.most_common(5)))
        kinds = Counter(k for f in nat for k in f.get("kinds", []))
        if kinds:
            notes.append("constructs alongside: " + ", ".join(k for k, _ in kinds.most_common(6)))
    return ResourceLimits(registers="; ".join(reg), shared_memory="; ".join(smem), notes="; ".join(notes))


def _applies(c: Candidate) -> AppliesWhen:
    t = c.technique
    dtypes = Counter(d for l in c.locs for d in l.facts.get("dtypes", []))
    common = sorted(d for d, n in dtypes.items() if n * 2 >= len(c.locs))
    native = all(l.facts.get("native") for l in c.locs)
    vendors = ["amd"] if "amd" in t.tags else (["nvidia"] if native or t.min_sm else ["nvidia", "amd"])
    return AppliesWhen(bottlenecks=[BottleneckClass(b) for b in t.bottlenecks], dtypes=common,
                       arch=ArchCondition(vendors=vendors, min_sm=t.min_sm))


def draft(c: Candidate, cap: int = 5) -> Draft:
    t = c.technique
    picked = _pick(c.locs, cap)
    upstream = [UpstreamLocation(project=l.project, version=l.version, path=l.path, symbol=l.symbol, lines=l.lines,
                                 note=_note(t, l.reason, l.line), sha256=l.sha256)
                for l in picked if l.project in KNOWN_PROJECTS]
    support = dict(sorted(Counter(l.project for l in c.locs).items()))
    notes = [f"support: {len(c.locs)} upstream {t.scope} locations in {len({l.path for l in c.locs})} files; "
             f"contrast: held by {c.share:.1%} of the {c.subjects} upstream {t.scope} subjects",
             f"safety guessed from what it changes: {t.safety.value}"]
    if c.library_overlap:
        notes.append("overlaps library patterns (Jaccard of locations): " + ", ".join(f"{k} {v}" for k, v in sorted(c.library_overlap.items())))
    if len(upstream) < 3:
        notes.append(f"only {len(upstream)} upstream locations: the technique is rare upstream")
    return Draft(
        id=t.id, title=t.title, category=t.category, present_when=Condition.model_validate(t.when),
        applies_when=_applies(c), resource_limits=_limits(c), safety=t.safety,
        evidence=PatternEvidence(upstream=upstream), tags=[t.family, t.scope, *t.tags, *sorted(support)],
        signature=[Condition.model_validate(t.when).describe()], support=support,
        contrast={"share": round(c.share, 4), "subjects": c.subjects, "held": len(c.locs)}, notes=notes,
    )


def propose(mined: list[Mined], entries, det: Detections | None, min_support: int = 3, max_drafts: int = 100,
            cap: int = 5, max_share: float = MAX_SHARE) -> tuple[list[Draft], list[Candidate]]:
    cands = candidates(mined, entries, det, min_support=min_support, max_share=max_share)
    chosen = [c for c in cands if not c.dropped][:max_drafts]
    return [draft(c, cap) for c in chosen], cands


def technique(draft_id: str) -> Technique | None:
    return BY_ID.get(draft_id)
