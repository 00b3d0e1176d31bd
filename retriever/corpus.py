"""The real-kernel corpus: `suggest` measured on Triton kernels the project did not write.

    python -m patterns.retriever.corpus fetch [--packages FILE]
    python -m patterns.retriever.corpus run [--labels FILE] [--out DIR] [--limit N]

`fetch` downloads the pinned wheels of evidence/corpus/packages.yaml
(`pip download --no-deps --only-binary=:all:`, into the user cache; nothing
is installed or imported) and copies out the files that define Triton kernels,
keeping package, version, path and hash of each. `run` analyses every kernel
twice, without shapes and with plausible ones named after the launcher's own
variables, and reports crashes, the kernels left without a sized bottleneck
and why, the verdict distribution and the time taken; on the hand-labelled
kernels (evidence/corpus/labels.yaml, written from reading the code before any
run) it reports recall@5 and how often an already-applied technique is
suggested. The report is a rich table and JSON + Markdown under evidence/corpus/.
"""
from __future__ import annotations

import hashlib
import json
import re
import signal
import statistics
import subprocess
import sys
import time
import traceback
import zipfile
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

import yaml

from patterns.core import files

REPO = Path(__file__).resolve().parents[1]
EVIDENCE = REPO / "evidence" / "corpus"
PACKAGES_FILE = EVIDENCE / "packages.yaml"
LABELS_FILE = EVIDENCE / "labels.yaml"
TOP = 5
MODES = ("plain", "shapes", "inputs")
HEAD = "| | without shapes | with shapes | with inputs |"
RULE = "| --- | --- | --- | --- |"
FILE_TIME_LIMIT_S = 60


class CorpusError(ValueError):
    """Bad corpus input (package list, labels, download); one line."""


def cache_root() -> Path:
    import os

    from platformdirs import user_cache_dir

    return Path(os.environ.get("PATTERNS_CACHE_DIR") or user_cache_dir("patterns"))


def corpus_dir() -> Path:
    return cache_root() / "corpus"


# --------------------------------------------------------------------------------------
# fetch
# --------------------------------------------------------------------------------------


@dataclass
class Package:
    name: str
    version: str
    include: list[str]
    max_files: int = 40
    exclude: list[str] = field(default_factory=list)


def load_packages(path: Path = PACKAGES_FILE) -> list[Package]:
    try:
        raw = yaml.safe_load(path.read_text())
        return [Package(**p) for p in raw]
    except (OSError, yaml.YAMLError, TypeError) as exc:
        raise CorpusError(f"{path}: not a package list ({str(exc).splitlines()[0]})") from None


def download(pkg: Package) -> Path:
    """The wheel of `pkg` in the user cache, downloaded once with pip."""
    dest = cache_root() / "upstream"
    dest.mkdir(parents=True, exist_ok=True)
    stem = re.sub(r"[-_.]+", "_", pkg.name).lower()

    def find() -> Path | None:
        for p in sorted(dest.glob("*.whl")):
            name, _, rest = p.name.partition("-")
            if re.sub(r"[-_.]+", "_", name).lower() == stem and rest.split("-", 1)[0] == pkg.version:
                return p
        return None

    found = find()
    if found is not None:
        return found
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--disable-pip-version-check",
           "-q", "-d", str(dest), f"{pkg.name}=={pkg.version}"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    found = find()
    if proc.returncode != 0 or found is None:
        errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("ERROR")]
        raise CorpusError(f"{pkg.name}=={pkg.version}: pip download failed: {(errors or ['no wheel saved'])[-1]}")
    return found


_KERNEL_HINT = re.compile(rb"@(\w+\.)*(jit|autotune|heuristics)\b|triton\.jit\(")


def _kernel_names(text: str, path: str) -> list[str]:
    from patterns.core.facts import FactsError, extract_source

    try:
        return [k.name for k in extract_source(text, path).kernels]
    except FactsError:
        return []


def select(pkg: Package, wheel: Path) -> list[dict]:
    """The package's Triton kernel files, a deterministic sample of at most max_files."""
    found = []
    with zipfile.ZipFile(wheel) as zf:
        for info in zf.infolist():
            name = info.filename
            if not name.endswith(".py") or not any(name.startswith(p) for p in pkg.include):
                continue
            if any(name.startswith(p) for p in pkg.exclude):
                continue
            raw = zf.read(info)
            if b"triton" not in raw or not _KERNEL_HINT.search(raw):
                continue
            text = raw.decode("utf-8", "replace")
            kernels = _kernel_names(text, name)
            if kernels:
                found.append({"path": name, "sha256": files.sha256_hex(raw), "kernels": kernels, "_raw": raw})
    found.sort(key=lambda f: hashlib.sha256(f"{pkg.name}/{f['path']}".encode()).hexdigest())
    return found[: pkg.max_files]


def fetch(packages: list[Package], progress=None) -> dict:
    """Download and copy out every package's sample; the manifest lists what was taken."""
    root = corpus_dir()
    manifest = {"packages": [], "files": []}
    task = progress.add_task("fetching wheels", total=len(packages)) if progress else None
    for pkg in packages:
        wheel = download(pkg)
        chosen = select(pkg, wheel)
        base = root / f"{pkg.name}-{pkg.version}"
        for f in chosen:
            files.write_atomic(base / f["path"], f.pop("_raw"), durable=False)
            manifest["files"].append({"package": pkg.name, "version": pkg.version, **f, "local": str(base / f["path"])})
        manifest["packages"].append({"name": pkg.name, "version": pkg.version, "wheel": wheel.name,
                                     "wheel_sha256": files.sha256_file(wheel), "files": len(chosen),
                                     "kernels": sum(len(f["kernels"]) for f in chosen)})
        if progress:
            progress.advance(task)
    files.write_atomic(root / "manifest.json", json.dumps(manifest, indent=1), durable=False)
    return manifest


def load_manifest() -> dict:
    path = corpus_dir() / "manifest.json"
    if not path.exists():
        raise CorpusError(f"{path}: no corpus yet (run `python -m patterns.retriever.corpus fetch`)")
    return json.loads(path.read_text())


# --------------------------------------------------------------------------------------
# plausible shapes: values for the launcher's own size names
# --------------------------------------------------------------------------------------

# (name pattern, value): serving-sized defaults for the names kernels use for their extents
_SIZE_NAMES: list[tuple[str, int]] = [
    (r"(?i)(b|batch|batch_size|bs|n_batch|num_seqs|num_batches|nb|n_seqs)", 8),
    (r"(?i)(t|s|l|seq_len|seqlen|seq_length|n_ctx|max_seqlen|max_seq_len|num_tokens|n_tokens|ntokens|total_tokens|token_num|tokens)", 4096),
    (r"(?i)(hkv|h_kv|hk|num_kv_heads|n_kv_heads|nheads_k|num_heads_kv|kv_head_num|num_kv_head)", 8),
    (r"(?i)(h|hq|hv|num_heads|n_heads|nheads|num_q_heads|head_num|num_heads_q|num_head|n_head)", 32),
    (r"(?i)(g|ng|kv_group_num|group_size|gqa_group_size|num_groups)", 4),
    (r"(?i)(d|k|v|dk|dv|head_dim|head_size|hd|d_head|headdim|qk_head_dim|v_head_dim|dim_head)", 128),
    (r"(?i)(m|n_rows|rows|n_row|num_rows|m_size|num_tokens_m)", 4096),
    (r"(?i)(n|n_cols|cols|hidden|hidden_size|dim|d_model|hidden_dim|n_col|num_cols|features|n_size|k_size)", 4096),
    (r"(?i)(numel|n_elements|n_elem|total_elements|num_elements|n_numel|size)", 1 << 24),
    (r"(?i)(e|num_experts|n_experts|experts|n_expert)", 8),
    (r"(?i)(topk|top_k)", 2),
    (r"(?i)(vocab|vocab_size|n_vocab)", 128256),
    (r"(?i)(page_size|page_block_size)", 16),
    (r"(?i)(chunk_size|bt)", 64),
    (r"(?i)(nt|num_chunks|n_chunks)", 64),
]
_GEMM = {"M": 4096, "N": 4096, "K": 4096}


def plausible_value(name: str, gemm: bool) -> int | None:
    if gemm and name in _GEMM:
        return _GEMM[name]
    for pattern, value in _SIZE_NAMES:
        if re.fullmatch(pattern, name):
            return value
    return None


def plausible_shapes(facts, kernel) -> dict[str, int]:
    """Values for the size names a kernel and its launcher use: its int parameters and the launcher's free names."""
    names: list[str] = [p.name for p in kernel.params if not p.constexpr]
    for la in kernel.launches:
        assigned = facts.host_assigns.get(la.function, {})
        texts = [expr for _, expr in assigned.values()] + la.args + list(la.kwargs.values()) + [la.grid]
        for text in texts:
            names += [n for n in re.findall(r"(?<![\w.])([A-Za-z_]\w*)\b(?!\s*\()", text) if n not in assigned]
    gemm = any(c.name == "tl.dot" and c.in_loop for c in kernel.calls) and {"M", "N", "K"} <= set(names)
    out = {}
    for n in dict.fromkeys(names):
        v = plausible_value(n, gemm)
        if v is not None:
            out[n] = v
    return out


_INT_TENSOR = re.compile(r"(?i)(idx|index|indices|ids|offsets|offs|lens|lengths|cu_seqlens\w*|positions|pos|table|mask|counts|sorted\w*|expert_ids)$")


def _split_top(text: str) -> list[str]:
    out, depth, cur = [], 0, ""
    for ch in text:
        depth += ch in "([{"
        depth -= ch in ")]}"
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    return [c for c in [*out, cur] if c.strip()]


def _launch_literals(facts, kernel) -> set[str]:
    """Parameters every launch of the kernel passes as a number, directly or through a launcher
    variable assigned one (`BLOCK_N = 1024`): sizes the launcher fixes, no user would give."""
    out: set[str] | None = None
    for la in kernel.launches:
        assigns = facts.host_assigns.get(la.function, {})
        passed = dict(zip([p.name for p in kernel.params], la.args)) | dict(la.kwargs)
        fixed = {n for n, e in passed.items() if re.fullmatch(r"\d+", (assigns[e.strip()][1] if e.strip() in assigns else e).strip())}
        out = fixed if out is None else out & fixed
    return out or set()


def plausible_blocks(kernel, shapes: dict[str, int], facts=None) -> dict[str, int]:
    """Block sizes a user passes for a kernel whose launcher computes them in a helper or an
    autotuner's generated configs: a block that a mask bounds by a whole extent (`cols < n_cols`,
    not moving with the program) covers it, as `triton.next_power_of_2(n_cols)` launchers do;
    any other tl.arange extent gets a 64 tile."""
    bound = {p.name for p in kernel.params if p.default is not None}
    if kernel.autotune and kernel.autotune.configs:
        bound |= set(kernel.autotune.configs[0])
    bound |= set(kernel.heuristics)
    if facts is not None:
        bound |= _launch_literals(facts, kernel)
    covers: dict[str, int] = {}
    for var, (_, expr) in kernel.assigns.items():
        m = re.fullmatch(r"\s*tl\.arange\(\s*0\s*,\s*([A-Za-z_]\w*)\s*\)\s*", expr)
        if not m or kernel.pid_deps.get(var):
            continue
        stepped = any(var in lp.assigned for lp in kernel.loops) or any(
            re.search(rf"\b{re.escape(var)}\b", e) and re.search(rf"\b{re.escape(lp.target)}\b", e)
            for lp in kernel.loops if lp.target for _, e in kernel.assigns.values())
        if stepped:
            continue  # a tile the kernel steps through a loop (a K loop), not a whole row
        for _, (_, mexpr) in kernel.assigns.items():
            for right in re.findall(rf"\b{re.escape(var)}\s*<\s*([A-Za-z_]\w*)\b", mexpr):
                if isinstance(shapes.get(right), int):
                    covers[m.group(1)] = 1 << (min(shapes[right], 65536) - 1).bit_length()
    out = {p.name: 8 for p in kernel.params if p.constexpr and "GROUP" in p.name.upper() and p.name not in bound}
    for c in kernel.calls:
        if c.name == "tl.arange" and len(c.args) == 2 and c.args[1].isidentifier() and kernel.param(c.args[1]) is not None:
            if kernel.param(c.args[1]).constexpr and c.args[1] not in bound:
                out[c.args[1]] = covers.get(c.args[1], 64)
    return out


def plausible_inputs(facts, kernel) -> dict[str, str]:
    """--input values a user would give: every tensor the launcher reads `.shape`/`.stride` of, with the rank
    its code implies and serving-size extents (the unpacked names' plausible values, else 4096);
    for a kernel launched elsewhere, its pointer parameters as 4096x4096 tensors."""
    out: dict[str, str] = {}

    def dtype(name: str) -> str:
        return "int32" if _INT_TENSOR.search(name) else "bf16"

    launch_names = {n for la in kernel.launches[:1] for n in facts.host_assigns.get(la.function, {})}
    gemm = any(c.name in ("tl.dot", "tl.dot_scaled") and c.in_loop for c in kernel.calls) and {"M", "N", "K"} <= launch_names
    # extents by rank where the launcher names none: (rows, cols), (batch, rows, cols), (B, T, H, D)
    by_rank = {1: [1 << 24], 2: [4096, 4096], 3: [8, 4096, 4096], 4: [8, 4096, 32, 128]}

    for la in kernel.launches[:1]:
        assigned = facts.host_assigns.get(la.function, {})
        texts = [e for _, e in assigned.values()] + la.args + list(la.kwargs.values()) + [la.grid]
        names = {m for t in texts for m in re.findall(r"\b([A-Za-z_]\w*)\.(?:shape|stride|size|numel|dim|view|reshape|dtype|device|contiguous|element_size)\b", t)}
        names |= {m for t in texts for m in re.findall(r"torch\.\w+_like\(\s*([A-Za-z_]\w*)", t)}
        for t in sorted(names):
            dims: dict[int, int] = {}
            for var, (_, expr) in assigned.items():
                m = re.fullmatch(rf"\(?{re.escape(t)}\.shape\)?\[(-?\d+)\]", expr.strip())
                if m:
                    dims[int(m.group(1))] = plausible_value(var, gemm) or 4096
                # B, T, H, K, V = *k.shape, v.shape[-1]: k's extents are the leading names
                m = re.fullmatch(rf"\(\*{re.escape(t)}\.shape, (.*)\)\[(\d+)\]", expr.strip())
                if m:
                    extra = len(_split_top(m.group(1)))
                    n = 1 + max(int(re.fullmatch(r".*\[(\d+)\]", e.strip()).group(1)) for _, e in assigned.values()
                                if re.fullmatch(rf"\(\*{re.escape(t)}\.shape, .*\)\[(\d+)\]", e.strip()))
                    if int(m.group(2)) < n - extra:
                        dims[int(m.group(2))] = plausible_value(var, gemm) or 4096
                        dims.setdefault(n - extra - 1, 4096)
            for var, (_, expr) in assigned.items():  # s0, s1, s2 = x.stride()
                m = re.fullmatch(rf"\(?{re.escape(t)}\.(?:stride|size)\(\)\)?\[(\d+)\]", expr.strip())
                if m:
                    dims.setdefault(int(m.group(1)), 4096)
            rank = max([len({i for i in dims if i >= 0})] + [i + 1 for i in dims if i >= 0] + [-i for i in dims if i < 0] + [
                int(i) + 1 if not i.startswith("-") else -int(i) for text in texts
                for i in re.findall(rf"\b{re.escape(t)}\.(?:shape\[|stride\(|size\()(-?\d+)", text)] + [2])
            if dtype(t) == "int32" and not dims:  # index and length tensors: one entry per sequence (+1)
                rank, shape = 1, [9]
            else:
                shape = list(by_rank.get(rank, [8] * (rank - 2) + [4096, 4096]))
            for i, v in dims.items():
                shape[i] = v
            out[t] = "x".join(map(str, shape)) + ":" + dtype(t)
    if not kernel.launches:
        from patterns.retriever.estimate import _pointer_param

        for c in kernel.calls:
            if c.name in ("tl.load", "tl.store") and c.args:
                p = _pointer_param(c.args[0], kernel)
                if p:
                    out.setdefault(p, "4096x4096:" + dtype(p.removesuffix("_ptr")))
    return out


# --------------------------------------------------------------------------------------
# run
# --------------------------------------------------------------------------------------


@dataclass
class KernelRun:
    package: str
    version: str
    path: str
    kernel: str
    mode: str  # "plain" | "shapes" | "inputs"
    verdict: str = ""
    sized: bool = False
    why_unsized: str = ""
    top: list[str] = field(default_factory=list)
    already: list[str] = field(default_factory=list)
    shapes: dict[str, int] = field(default_factory=dict)
    inputs: dict[str, str] = field(default_factory=dict)


@dataclass
class FileRun:
    package: str
    version: str
    path: str
    mode: str
    seconds: float
    kernels: list[KernelRun] = field(default_factory=list)
    crash: str = ""  # traceback's last line: an exception suggest did not turn into a one-line error
    rejected: str = ""  # a one-line error (bad input as suggest sees it)


class _Timeout(Exception):
    pass


def _alarm(signum, frame):  # noqa: ARG001
    raise _Timeout()


def _unsized_reason(kernel_facts, report_kernel) -> str:
    """Why a kernel got no sized verdict: the launch is elsewhere, or the names the estimate could not size."""
    text = " ".join(report_kernel.bottleneck.rationale)
    m = re.search(r"not sized: (.*?)(; patterns ranked|$)", text)
    if m:
        return m.group(1)[:160]
    if kernel_facts is not None and not kernel_facts.launches:
        return "no launch in this file (launcher elsewhere)"
    m = re.search(r"unknown: ([^)]*)\)", text)
    if m:
        return "unknown: " + m.group(1)
    m = re.search(r"not sized[^:]*: ?(.*)", text)
    return m.group(1)[:80] if m else "launch not replayable"


def run_file(entry: dict, mode: str, entries) -> FileRun:
    from patterns.core.facts import FactsError, extract_file
    from patterns.retriever.retrieve import RetrieveError, suggest

    path = Path(entry["local"])
    out = FileRun(entry["package"], entry["version"], entry["path"], mode, 0.0)
    t0 = time.perf_counter()
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(FILE_TIME_LIMIT_S)
    try:
        facts = extract_file(path)
        by_name = {k.name: k for k in facts.kernels}
        shapes: dict[str, int] = {}
        inputs: dict[str, str] = {}
        per_kernel: dict[str, dict[str, str]] = {}
        blocks: dict[str, dict[str, int]] = {}  # kernel -> block sizes a user would give for it
        if mode in ("shapes", "inputs"):
            for k in facts.kernels:
                shapes.update(plausible_shapes(facts, k))
        if mode == "inputs":
            from patterns.retriever.launcher import parse_input

            base = dict(shapes)
            for k in facts.kernels:
                blocks[k.name] = {n: v for n, v in plausible_blocks(k, base, facts).items() if n not in base}
                shapes.update({n: v for n, v in blocks[k.name].items() if n not in shapes})

            for k in facts.kernels:
                per_kernel[k.name] = plausible_inputs(facts, k)
                inputs.update(per_kernel[k.name])
        for n in inputs:
            shapes.pop(n, None)  # a tensor, not a size (`g` of a gate is not a group count)
        if inputs:
            # sizes the launcher computes from an input (`N = x.numel()`, `M, K = a.shape`) come from that
            # input, as they do for a user who gives the tensor: no --shape for them beside it
            for k in facts.kernels:
                for la in k.launches:
                    for var, (_, expr) in facts.host_assigns.get(la.function, {}).items():
                        if var in shapes and any(re.search(rf"\b{re.escape(n)}\b", expr) for n in inputs):
                            shapes.pop(var)
        conflict = any(inputs.get(n) != v for ki in per_kernel.values() for n, v in ki.items())
        # a block one kernel needs given, that another kernel's launcher fixes itself (`BLOCK_N = 1024`):
        # a file-wide --shape would override that launcher, so one kernel at a time, as a user would
        fixed = {n for k in facts.kernels for n in _launch_literals(facts, k)}
        conflict = conflict or any(n in fixed for kb in blocks.values() for n in kb)
        if conflict:  # launchers that call the same name different tensors: one kernel at a time, as a user would
            kernel_reports = []
            for name, ki in per_kernel.items():
                if by_name[name].device_function:
                    continue
                tensors = dict(parse_input(f"{n}={v}") for n, v in ki.items()) or None
                own = {n: v for n, v in shapes.items() if n not in {b for kb in blocks.values() for b in kb}} | blocks.get(name, {})
                own = {n: v for n, v in own.items() if n not in ki}
                kernel_reports += suggest(path, kernel=name, shapes=own, top=TOP, entries=entries, inputs=tensors, strict_names=False).kernels
            host = suggest(path, shapes=shapes, top=TOP, entries=entries, strict_names=False).kernels
            kernel_reports += [k for k in host if k.kernel == "<host code>"]
        else:
            tensors = dict(parse_input(f"{n}={v}") for n, v in inputs.items()) if inputs else None
            kernel_reports = suggest(path, shapes=shapes, top=TOP, entries=entries, inputs=tensors, strict_names=False).kernels
        for kr in kernel_reports:
            kf = by_name.get(kr.kernel)
            sized = "programs" in kr.bottleneck.numbers or kr.bottleneck.source != "estimate"
            out.kernels.append(KernelRun(
                entry["package"], entry["version"], entry["path"], kr.kernel, mode,
                verdict=kr.bottleneck.cls.value, sized=sized,
                why_unsized="" if sized or kf is None else _unsized_reason(kf, kr),
                top=[s.pattern_id for s in kr.suggestions], already=[s.pattern_id for s in kr.already_applied],
                shapes={n: v for n, v in shapes.items()} if kf is not None else {},
                inputs=per_kernel.get(kr.kernel, {}),
            ))
    except (FactsError, RetrieveError) as exc:
        out.rejected = str(exc).splitlines()[0]
    except _Timeout:
        out.crash = f"timed out after {FILE_TIME_LIMIT_S} s"
    except Exception as exc:  # the measurement: every other exception is a crash of suggest
        tb = traceback.extract_tb(exc.__traceback__)
        where = f"{Path(tb[-1].filename).name}:{tb[-1].lineno}" if tb else ""
        out.crash = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''} ({where})"
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    out.seconds = time.perf_counter() - t0
    return out


# --------------------------------------------------------------------------------------
# labels: recall@5 and already-applied suggestions
# --------------------------------------------------------------------------------------


@dataclass
class Label:
    package: str
    version: str
    path: str
    kernel: str
    expected: list[str]
    applied: list[str]
    bottleneck: str
    why: str = ""


def load_labels(path: Path = LABELS_FILE, known: set[str] | None = None) -> list[Label]:
    try:
        raw = yaml.safe_load(path.read_text()) or []
    except (OSError, yaml.YAMLError) as exc:
        raise CorpusError(f"{path}: not a label file ({str(exc).splitlines()[0]})") from None
    out = []
    for i, r in enumerate(raw):
        try:
            lab = Label(r["package"], str(r["version"]), r["path"], r["kernel"], r.get("expected", []) or [],
                        r.get("applied", []) or [], r["bottleneck"], r.get("why", ""))
        except (KeyError, TypeError) as exc:
            raise CorpusError(f"{path}: label {i + 1}: missing {exc}") from None
        if known is not None:
            bad = [p for p in lab.expected + lab.applied if p not in known]
            if bad:
                raise CorpusError(f"{path}: label {i + 1} ({lab.kernel}): no pattern named {', '.join(bad)}")
        out.append(lab)
    return out


def score_labels(labels: list[Label], runs: list[KernelRun], mode: str) -> dict:
    by_key = {(r.package, r.path, r.kernel): r for r in runs if r.mode == mode}
    rows, recalls, n_top, n_applied_suggested, missing = [], [], 0, 0, []
    for lab in labels:
        r = by_key.get((lab.package, lab.path, lab.kernel))
        if r is None:
            missing.append(f"{lab.package}/{lab.path}:{lab.kernel}")
            continue
        hits = [p for p in lab.expected if p in r.top]
        if lab.expected:
            recalls.append(len(hits) / len(lab.expected))
        resuggested = [p for p in r.top if p in lab.applied]
        n_top += len(r.top)
        n_applied_suggested += len(resuggested)
        rows.append({"package": lab.package, "path": lab.path, "kernel": lab.kernel, "expected": lab.expected,
                     "top": r.top, "hits": hits, "applied": lab.applied, "recognised": [p for p in lab.applied if p in r.already],
                     "resuggested": resuggested, "bottleneck_label": lab.bottleneck, "bottleneck_tool": r.verdict,
                     "sized": r.sized})
    return {
        "mode": mode, "labelled": len(labels), "scored": len(rows), "missing": missing,
        "with_expected": len(recalls), "recall_at_5": round(sum(recalls) / len(recalls), 3) if recalls else None,
        "top5_suggestions": n_top, "already_applied_suggested": n_applied_suggested,
        "already_applied_rate": round(n_applied_suggested / n_top, 3) if n_top else 0.0,
        "applied_recognised": sum(len(r["recognised"]) for r in rows), "applied_labelled": sum(len(r["applied"]) for r in rows),
        "bottleneck_agrees": sum(r["bottleneck_label"] == r["bottleneck_tool"] for r in rows),
        "rows": rows,
    }


# --------------------------------------------------------------------------------------
# summary and report
# --------------------------------------------------------------------------------------


def _reason_class(why: str) -> str:
    """A reason's kind, for the table (the per-kernel text stays in report.json)."""
    out = []
    if "--input" in why or "--shape" in why:
        out.append("names to give (--shape/--input)")
    if "cannot replay" in why:
        out.append("launcher not replayable (helper call, comprehension)")
    if "no launch in this file" in why:
        out.append("launched elsewhere, no pointer input")
    if "grid sized, body not" in why:
        out.append("grid sized, body not (block sizes unknown)")
    return " + ".join(out) or why[:60] or "unknown"


def summarise(manifest: dict, file_runs: list[FileRun], labels: list[Label]) -> dict:
    summary: dict = {"packages": manifest["packages"], "modes": {}}
    all_kernels = [k for f in file_runs for k in f.kernels]
    for mode in MODES:
        fr = [f for f in file_runs if f.mode == mode]
        ks = [k for k in all_kernels if k.mode == mode and k.kernel != "<host code>"]
        secs = sorted(f.seconds for f in fr)
        reasons = Counter(_reason_class(k.why_unsized) for k in ks if not k.sized)
        summary["modes"][mode] = {
            "files": len(fr), "kernels": len(ks),
            "crashes": [{"package": f.package, "path": f.path, "error": f.crash} for f in fr if f.crash],
            "rejected": [{"package": f.package, "path": f.path, "error": f.rejected} for f in fr if f.rejected],
            "sized": sum(k.sized for k in ks), "unsized_reasons": dict(reasons.most_common()),
            "verdicts": dict(Counter(k.verdict for k in ks).most_common()),
            "sized_verdicts": dict(Counter(k.verdict for k in ks if k.sized).most_common()),
            "kernels_without_suggestion": sum(not k.top for k in ks),
            "top1": dict(Counter(k.top[0] for k in ks if k.top).most_common()),
            "already_applied": dict(Counter(p for k in ks for p in k.already).most_common()),
            "seconds_total": round(sum(secs), 2),
            "seconds_median_per_file": round(statistics.median(secs), 3) if secs else 0,
            "seconds_max_per_file": round(secs[-1], 3) if secs else 0,
        }
    summary["labels"] = {mode: score_labels(labels, all_kernels, mode) for mode in MODES} if labels else {}
    return summary


def markdown(summary: dict) -> str:
    lines = ["# Real-kernel corpus", "",
             "Generated by `python -m patterns.retriever.corpus fetch && python -m patterns.retriever.corpus run`: "
             "`patterns suggest` (top 5) on every Triton kernel file of the sample below, read from the published "
             "wheels (nothing from them is committed), once without shapes, once with plausible values for the "
             "size names each launcher uses (`shapes`), and once with those plus input tensors as a user would give "
             "them (`inputs`: `--input NAME=D0xD1:DTYPE` for every tensor the launcher reads `.shape` or `.stride` of, "
             "with the rank its code implies and serving-size extents; for a kernel launched from another file, its "
             "pointer parameters as 4096x4096 tensors; the inputs used per kernel are in report.json `kernel_runs`).", "",
             "| package | version | files | kernels |", "| --- | --- | --- | --- |"]
    for p in summary["packages"]:
        lines.append(f"| {p['name']} | {p['version']} | {p['files']} | {p['kernels']} |")
    lines.append(f"| **total** | | {sum(p['files'] for p in summary['packages'])} | {sum(p['kernels'] for p in summary['packages'])} |")
    lines += ["", HEAD, RULE]
    m = summary["modes"]

    def row(label, f):
        lines.append(f"| {label} | " + " | ".join(str(f(m[mode])) for mode in MODES) + " |")

    for label, key in (("files", "files"), ("kernels", "kernels"), ("sized", "sized")):
        row(label, lambda x, key=key: x[key])
    row("sized share", lambda x: f"{x['sized'] / x['kernels']:.1%}" if x["kernels"] else "-")
    for label, key in (("crashes", "crashes"), ("rejected files", "rejected")):
        row(label, lambda x, key=key: len(x[key]))
    row("kernels without any suggestion", lambda x: x["kernels_without_suggestion"])
    row("time total / median per file / max (s)", lambda x: f"{x['seconds_total']} / {x['seconds_median_per_file']} / {x['seconds_max_per_file']}")
    for title, key in (("Verdicts", "verdicts"), ("Verdicts of sized kernels", "sized_verdicts"),
                       ("Why a kernel was not sized", "unsized_reasons"), ("Top-ranked pattern", "top1"),
                       ("Reported as already applied", "already_applied")):
        keys = list(dict.fromkeys(k for mode in MODES for k in m[mode][key]))
        lines += ["", f"## {title}", "", HEAD, RULE]
        lines += [f"| {k} | " + " | ".join(str(m[mode][key].get(k, 0)) for mode in MODES) + " |" for k in keys]
    for mode in MODES:
        for kind in ("crashes", "rejected"):
            if m[mode][kind]:
                lines += ["", f"## {kind.capitalize()} ({mode})", ""]
                lines += [f"- {c['package']} `{c['path']}`: {c['error']}" for c in m[mode][kind]]
    if summary.get("labels"):
        lines += ["", "## Labelled kernels", "",
                  "Labels in evidence/corpus/labels.yaml, written from reading each kernel before the tool ran on it. "
                  "recall@5: share of the expected techniques (those the library has a pattern for) in the top 5; "
                  "already-applied rate: top-5 suggestions the kernel already applies, over all top-5 suggestions.", "",
                  HEAD, RULE]
        L = summary["labels"]
        lines.append("| kernels labelled / scored | " + " | ".join(f"{L[x]['labelled']} / {L[x]['scored']}" for x in MODES) + " |")
        for label, key in (("recall@5", "recall_at_5"), ("already-applied suggested", "already_applied_suggested"),
                           ("already-applied rate", "already_applied_rate")):
            lines.append(f"| {label} | " + " | ".join(str(L[x][key]) for x in MODES) + " |")
        lines.append("| applied techniques recognised | " + " | ".join(f"{L[x]['applied_recognised']} of {L[x]['applied_labelled']}" for x in MODES) + " |")
        lines.append("| bottleneck label agrees | " + " | ".join(str(L[x]["bottleneck_agrees"]) for x in MODES) + " |")
        lines.append("| labelled kernels sized | " + " | ".join(str(sum(r["sized"] for r in L[x]["rows"])) for x in MODES) + " |")
        lines += ["", "| kernel | expected | top 5 (with inputs) | missed | re-suggested | bottleneck label / tool |", "| --- | --- | --- | --- | --- | --- |"]
        for r in L["inputs"]["rows"]:
            missed = [p for p in r["expected"] if p not in r["hits"]]
            lines.append(f"| {r['package']} `{r['path']}` {r['kernel']} | {', '.join(r['expected'])} | {', '.join(r['top'])} | "
                         f"{', '.join(missed)} | {', '.join(r['resuggested'])} | {r['bottleneck_label']} / {r['bottleneck_tool']}{'' if r['sized'] else ' (unsized)'} |")
    unsized = [k for k in summary.get("kernel_runs", []) if k["mode"] == "inputs" and not k["sized"] and k["kernel"] != "<host code>"]
    if unsized:
        lines += ["", "## Kernels not sized with inputs, and why", "", "| kernel | why |", "| --- | --- |"]
        lines += [f"| {k['package']} `{k['path']}` {k['kernel']} | {k['why_unsized'].replace('|', '/')} |" for k in unsized]
    return "\n".join(lines) + "\n"


def print_summary(summary: dict, console) -> None:
    from rich.table import Table

    t = Table("package", "version", "files", "kernels", title="corpus", title_justify="left")
    for p in summary["packages"]:
        t.add_row(p["name"], p["version"], str(p["files"]), str(p["kernels"]))
    console.print(t)
    m = summary["modes"]
    t = Table("", *MODES, title="suggest on the corpus", title_justify="left")
    for label, key in (("files", "files"), ("kernels", "kernels"), ("sized", "sized")):
        t.add_row(label, *(str(m[x][key]) for x in MODES))
    t.add_row("crashes", *(str(len(m[x]["crashes"])) for x in MODES))
    t.add_row("rejected files", *(str(len(m[x]["rejected"])) for x in MODES))
    for v in dict.fromkeys(k for x in MODES for k in m[x]["verdicts"]):
        t.add_row(f"verdict {v}", *(str(m[x]["verdicts"].get(v, 0)) for x in MODES))
    t.add_row("time (s)", *(str(m[x]["seconds_total"]) for x in MODES))
    console.print(t)
    if summary.get("labels"):
        L = summary["labels"]
        t = Table("labelled kernels", *MODES, title_justify="left")
        t.add_row("scored", *(str(L[x]["scored"]) for x in MODES))
        t.add_row("recall@5", *(str(L[x]["recall_at_5"]) for x in MODES))
        t.add_row("already-applied rate", *(str(L[x]["already_applied_rate"]) for x in MODES))
        console.print(t)


def main(argv: list[str] | None = None) -> int:
    import argparse

    from rich.console import Console
    from rich.progress import Progress

    ap = argparse.ArgumentParser(prog="python -m patterns.retriever.corpus")
    sub = ap.add_subparsers(dest="verb", required=True)
    f = sub.add_parser("fetch", help="download the pinned wheels and copy out their Triton kernel files")
    f.add_argument("--packages", type=Path, default=PACKAGES_FILE)
    r = sub.add_parser("run", help="run suggest on every corpus kernel and write the report")
    r.add_argument("--labels", type=Path, default=LABELS_FILE)
    r.add_argument("--out", type=Path, default=EVIDENCE, help="folder for report.json and report.md")
    r.add_argument("--limit", type=int, default=None, help="only the first N files (a quick look)")
    r.add_argument("--mode", choices=[*MODES, "all"], default="all")
    args = ap.parse_args(argv)
    console = Console(stderr=True)
    try:
        if args.verb == "fetch":
            with Progress(console=console, transient=True) as progress:
                manifest = fetch(load_packages(args.packages), progress)
            for p in manifest["packages"]:
                console.print(f"{p['name']}=={p['version']}: {p['files']} files, {p['kernels']} kernels")
            console.print(f"{len(manifest['files'])} files in {corpus_dir()}")
            return 0
        from patterns.core.library import load_library

        manifest = load_manifest()
        entries = load_library()
        labels = load_labels(args.labels, {e.id for e in entries}) if args.labels.exists() else []
        chosen = manifest["files"][: args.limit]
        modes = list(MODES) if args.mode == "all" else [args.mode]
        runs: list[FileRun] = []
        with Progress(console=console, transient=True) as progress:
            task = progress.add_task("suggest on the corpus", total=len(chosen) * len(modes))
            for mode in modes:
                for entry in chosen:
                    runs.append(run_file(entry, mode, entries))
                    progress.advance(task)
        for mode in MODES:
            if mode not in modes:  # a one-mode run still fills both columns' keys
                runs += [FileRun(f.package, f.version, f.path, mode, 0.0) for f in runs if f.mode == modes[0]]
        summary = summarise(manifest, runs, labels)
        summary["kernel_runs"] = [asdict(k) for fr in runs for k in fr.kernels]
        args.out.mkdir(parents=True, exist_ok=True)
        files.write_atomic(args.out / "report.json", json.dumps(summary, indent=1))
        files.write_atomic(args.out / "report.md", markdown(summary))
        print_summary(summary, Console())
        console.print(f"wrote {args.out / 'report.json'} and {args.out / 'report.md'}")
        return 0
    except CorpusError as exc:
        console.print(f"error: {exc}")
        return 2


if __name__ == "__main__":
    sys.exit(main())
