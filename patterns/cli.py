"""The `patterns` command line.

Every user-facing error is one line on stderr with exit code 2 (see `main`):
the library, facts and validation code raise errors whose message already
names the file and what is wrong.
"""
from __future__ import annotations

import json
import re
import sys
from enum import Enum
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table

from patterns import api
from patterns.api import UsageError
from patterns.core.library import check_entry, load_library
from patterns.core.schema import BottleneckClass, Category, Safety, Status

app = typer.Typer(
    name="patterns",
    help="Optimization patterns for GPU kernels: find the technique that fits a kernel's bottleneck.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        from patterns import __version__

        print(f"patterns {__version__}")
        raise typer.Exit()


@app.callback()
def _root(version: bool = typer.Option(False, "--version", "-V", callback=_version, is_eager=True, help="print the version and exit")) -> None:
    """Optimization patterns for GPU kernels: find the technique that fits a kernel's bottleneck."""
console = Console()
err_console = Console(stderr=True)


class Format(str, Enum):
    table = "table"
    json = "json"


# --------------------------------------------------------------------------------------
# browsing
# --------------------------------------------------------------------------------------


@app.command("list")
def list_cmd(
    category: Optional[Category] = typer.Option(None, help="only this category"),
    bottleneck: Optional[BottleneckClass] = typer.Option(None, help="only patterns for this bottleneck"),
    project: Optional[str] = typer.Option(None, help="only patterns with evidence in this upstream project (sglang, fla, deepgemm)"),
    safety: Optional[Safety] = typer.Option(None, help="only this safety level"),
    status: Optional[Status] = typer.Option(None, help="only this status"),
    format: Format = typer.Option(Format.table, "--format", help="table or json"),
) -> None:
    """List the library's patterns."""
    rows = api.list_patterns(category, bottleneck, project, safety, status)
    if format == Format.json:
        print(json.dumps(rows, indent=2))
        return
    table = Table(title=f"{len(rows)} patterns", title_justify="left", show_lines=False)
    table.add_column("id", no_wrap=True)
    for col in ("category", "safety", "bottlenecks", "upstream", "rewrite"):
        table.add_column(col, overflow="fold")
    for r in rows:
        table.add_row(
            f"[bold]{r['id']}[/]\n[dim]{r['title']}[/]",
            r["category"],
            r["safety"],
            ", ".join(r["bottlenecks"]),
            ", ".join(r["projects"]),
            r["rewrite"] or "[dim]by hand[/]",
        )
    console.print(table)


def _measured_table(title: str, measured) -> Table:
    """Measurements with their metric spelt out: a speed ratio only where the metric is speedup."""
    t = Table(title=title, title_justify="left")
    for col in ("hardware", "shapes", "baseline", "candidate", "metric", "ratio"):
        t.add_column(col, overflow="fold")
    for m in measured:
        t.add_row(m.hardware, m.shapes, m.baseline, m.candidate, "speed (x)" if m.metric == "speedup" else f"{m.metric} (not speed)",
                  f"{m.ratio:.3g}")
    return t


@app.command("show")
def show_cmd(
    pattern_id: str = typer.Argument(..., metavar="ID", help="pattern id, e.g. tf32x3_dot_precision"),
    format: Format = typer.Option(Format.table, "--format", help="table (rendered) or json"),
) -> None:
    """Show one pattern: mechanism, conditions, evidence, traps and the before→after diff."""
    # rendering-only imports: markdown-it and pygments cost every other command ~0.1 s
    from rich.markdown import Markdown
    from rich.panel import Panel
    from rich.syntax import Syntax

    from patterns.core.library import get

    if format == Format.json:
        print(json.dumps(api.show_pattern(pattern_id), indent=2))
        return
    e = get(pattern_id)
    p = e.pattern
    head = f"[bold]{p.title}[/]\n[dim]{p.id} · {p.category.value} · {p.status.value} · {p.safety.value}[/]\n\n{p.summary}"
    console.print(Panel(head, expand=False))
    console.print(Markdown("## Why\n" + p.why))
    aw = p.applies_when
    cond = aw.conditions.describe() if aw.conditions else "(no code condition)"
    console.print(Markdown("## When it applies"))
    console.print(f"  bottlenecks: {', '.join(b.value for b in aw.bottlenecks)}")
    console.print(f"  conditions:  {cond}")
    arch = aw.arch
    console.print(f"  arch:        {', '.join(arch.vendors)}" + (f", sm ≥ {arch.min_sm}" if arch.min_sm else ""))
    if aw.dtypes:
        console.print(f"  dtypes:      {', '.join(aw.dtypes)}")
    console.print(f"  already present when: {p.present_when.describe()}")
    rl = p.resource_limits
    console.print(Markdown("## Resource limits"))
    for name in ("registers", "shared_memory", "sm_count", "occupancy", "notes"):
        if getattr(rl, name):
            console.print(f"  [bold]{name}[/]: {getattr(rl, name)}")
    console.print(Markdown("## Transformation\n" + p.transformation.method))
    console.print(f"  automatic rewrite: {p.transformation.rewrite or 'none — apply by hand'}")
    console.print(f"  safety: [bold]{p.safety.value}[/] — {p.safety.review}")
    console.print(Markdown("## Evidence"))
    for u in p.evidence.upstream:
        console.print(f"  • {u.ref}" + (f" — {u.note}" if u.note else ""))
    from patterns.core.user_evidence import records

    if p.evidence.measured:
        console.print(_measured_table("measured (the library's curated evidence)", p.evidence.measured))
    else:
        console.print("  [dim]no measured results in the library yet[/]")
    mine = [r.measurement for r in records(p.id)]
    if mine:
        console.print(_measured_table("your local evidence (your evidence store; `patterns evidence export` to propose it)", mine))
    if p.traps:
        console.print(Markdown("## Traps"))
        for t in p.traps:
            console.print(f"  • [bold]{t.fact}[/]\n    why: {t.why}\n    how: {t.how}")
    diff = api.example_diff(e)
    if diff is not None:
        title = f"## Before → after: what `patterns apply {e.id}` writes" if p.transformation.rewrite else "## Before → after"
        console.print(Markdown(title))
        console.print(Syntax(diff, "diff", theme="ansi_dark", word_wrap=True))
    refuses = api.refused(e)
    if refuses:
        console.print(Markdown("## What the rewrite refuses"))
        for r in refuses:
            console.print(f"  • {r['case']}: {r['reason']}" + (f"\n    ({r['note']})" if r["note"] else ""), markup=False)


@app.command("search")
def search_cmd(
    text: str = typer.Argument(..., help="what you are looking for, e.g. 'decode under-fills the GPU'"),
    top: int = typer.Option(8, help="how many results"),
    format: Format = typer.Option(Format.table, "--format"),
    chroma_url: Optional[str] = typer.Option(None, "--chroma-url", help="use a ChromaDB server instead of the embedded index"),
    keyword: bool = typer.Option(False, "--keyword", help="keyword matching only (no index)"),
) -> None:
    """Search the library: semantic (embedding index) blended with keyword matches."""
    if not text.strip():
        raise UsageError("search: the query is empty (say what you are looking for, e.g. 'decode under-fills the GPU')")
    with _progress() as progress:
        results = api.search_patterns(text, top=top, keyword=keyword, chroma_url=chroma_url, progress=progress)
    if format == Format.json:
        print(json.dumps(results, indent=2))
        return
    if not results:
        console.print(f"no pattern matches '{text}'")
        return
    table = Table("score", "id", "summary", title=f"search: {text}", title_justify="left")
    table.columns[1].no_wrap = True
    for r in results:
        table.add_row(f"{r['score']:.2f}", f"[bold]{r['id']}[/]\n[dim]{r['category']}[/]", r["summary"])
    console.print(table)


@app.command("check")
def check_cmd(
    run: bool = typer.Option(False, "--run", help="also run every example against its reference (slow on CPU)"),
    library: Optional[Path] = typer.Option(None, help="library folder (default: the bundled one)"),
) -> None:
    """Check the library: schema, example files, present_when on before/after, and (with --run) the examples."""
    from patterns.rewriter import REWRITES

    entries = load_library(library)
    problems: list[str] = []
    for e in entries:
        problems += check_entry(e, rewrites=REWRITES)
    if run and not problems:
        from patterns.core.examples import run_example

        for e in entries:
            if e.pattern.example.gpu_only:
                continue
            for which in ("before", "after"):
                for r in run_example(e, which):
                    if not r.passed:
                        problems.append(f"{e.file(which + '.py')}: example: {r.shape} seed={r.seed}: {r.reason}")
                        break
    for line in problems:
        err_console.print(line, markup=False, highlight=False)
    if problems:
        raise typer.Exit(2)
    console.print(f"{len(entries)} patterns OK" + (" (examples run)" if run else ""))


@app.command("docs")
def docs_cmd(out: Path = typer.Argument(..., help="output folder for the static HTML catalog")) -> None:
    """Render the library as a static HTML catalog (index with filters and search, a page per pattern)."""
    from patterns.catalog import render_catalog

    index = render_catalog(load_library(), out)
    console.print(f"catalog written: {index}")


# --------------------------------------------------------------------------------------
# retrieval
# --------------------------------------------------------------------------------------


class SuggestFormat(str, Enum):
    table = "table"
    json = "json"
    sarif = "sarif"


def _parse_shapes(items: list[str]) -> dict[str, int]:
    shapes = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip().isidentifier():
            raise UsageError(f"--shape: expected NAME=INT, got '{item}'")
        try:
            shapes[name.strip()] = int(value)
        except ValueError:
            raise UsageError(f"--shape: {name}: '{value}' is not an integer") from None
    return shapes


def _parse_dtypes(items: list[str]) -> tuple[str, dict[str, str]]:
    default, overrides = "bfloat16", {}
    for item in items:
        name, sep, value = item.rpartition("=")
        if sep:
            overrides[name] = value
        else:
            default = value
    return default, overrides


def _progress():
    from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    return Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                    TimeElapsedColumn(), console=err_console, transient=True, disable=not err_console.is_terminal)


FAIL_ON = [c.value for c in BottleneckClass] + ["any"]


def _fail_on(items: list[str]) -> set[str]:
    out: set[str] = set()
    for item in items:
        for v in item.split(","):
            v = v.strip()
            if v not in FAIL_ON:
                raise UsageError(f"--fail-on: '{v}' is not one of {', '.join(FAIL_ON)}")
            out.add(v)
    return out


def kernel_files(paths: list[Path]) -> list[tuple[Path, bool]]:
    """Files to analyse, (path, given explicitly): directories recurse into *.py, as `ruff check src/` does."""
    out: list[tuple[Path, bool]] = []
    for p in paths:
        if p.is_dir():
            for f in sorted(p.rglob("*.py")):
                rel = f.relative_to(p).parts
                if not any(part.startswith(".") or part in ("__pycache__", "node_modules") for part in rel[:-1]):
                    out.append((f, False))
        else:
            if not p.exists():
                raise UsageError(f"{p}: no such file or directory")
            out.append((p, True))
    return out


@app.command("suggest")
def suggest_cmd(
    paths: list[Path] = typer.Argument(..., metavar="PATH...", help="kernel files or directories (recursing into *.py) with @triton.jit kernels and their launchers"),
    kernel: Optional[str] = typer.Option(None, "--kernel", help="only this kernel of the file"),
    shape: list[str] = typer.Option([], "--shape", help="shape variable, NAME=INT (repeat): B=8 T=1 H=32 K=128"),
    input_: list[str] = typer.Option([], "--input", help="an input tensor as you know it, NAME=D0xD1[:DTYPE] (repeat): x=4096x4096:bf16; NAME is a launcher argument or a kernel pointer parameter"),
    dtype: list[str] = typer.Option([], "--dtype", help="element type of the tensors (default bf16), or PARAM=DTYPE for one pointer"),
    profile: Optional[Path] = typer.Option(None, "--profile", help="ncu --csv --page raw export, .ncu-rep report, torch.profiler trace, or evidence bundle"),
    arch: str = typer.Option("h200", "--arch", help="target GPU: h200, h100, a100, b200, mi300x"),
    triton_version: Optional[str] = typer.Option(None, "--triton", metavar="VERSION", help="the Triton the kernel will run on (default: the installed one)"),
    top: int = typer.Option(5, "--top", min=1, help="suggestions per kernel"),
    format: SuggestFormat = typer.Option(SuggestFormat.table, "--format", help="table, json (docs/suggest.schema.json) or sarif"),
    fail_on: list[str] = typer.Option([], "--fail-on", metavar="CLASS", help="exit 1 when a kernel's bottleneck is CLASS (memory-bound, ..., comma-separated or repeated), or on any suggestion (any)"),
    check_rewrites: Optional[bool] = typer.Option(None, "--check-rewrites/--no-check-rewrites", help="run each suggested rewrite's preconditions on the kernel (default: when at most 3 rewrites are suggested; each costs a parse of the file)"),
    catalog_url: Optional[str] = typer.Option(None, "--catalog-url", help="base URL of the `patterns docs` catalog, for SARIF helpUri (default $PATTERNS_CATALOG_URL)"),
    chroma_url: Optional[str] = typer.Option(None, "--chroma-url", help="use a ChromaDB server (http://127.0.0.1:PORT) instead of the embedded index"),
) -> None:
    """Find the patterns that fit each kernel's bottleneck, with the evidence behind them."""
    if profile is not None and profile.is_dir() and profile.suffix != ".ncu-rep":
        raise UsageError(f"--profile: {profile} is a folder, not a profile file")
    shapes = _parse_shapes(shape)
    default_dtype, overrides = _parse_dtypes(dtype)
    failing = _fail_on(fail_on)
    files = kernel_files(paths)
    reports, skipped = [], 0
    with _progress() as progress:
        task = progress.add_task("files", total=len(files)) if len(files) > 1 else None
        for path, explicit in files:
            try:
                reports.append(api.suggest_report(path, kernel=kernel, shapes=shapes, arch=arch, dtype=default_dtype, dtypes=overrides,
                                                  profile=profile, top=top, chroma_url=chroma_url, progress=progress if task is None else None,
                                                  inputs=input_, triton=triton_version, strict_names=len(files) == 1,
                                                  check_rewrites_=check_rewrites))
            except api.user_errors() as exc:
                # in a directory walk, files without kernels (and names only other files use) are not errors
                if explicit and len(files) == 1:
                    raise
                if explicit and "no @triton.jit kernel" not in str(exc):
                    raise
                skipped += 1
            if task is not None:
                progress.advance(task)
    if not reports:
        raise UsageError(f"{', '.join(map(str, paths))}: no @triton.jit kernel found")
    used = {n for r in reports for n in [*r.shapes, *r.inputs]}
    unused = [n for n in [*shapes, *(i.partition("=")[0] for i in input_)] if n not in used]
    if unused:
        raise UsageError(f"--shape/--input: no kernel or launcher of the {len(reports)} file(s) uses {', '.join(unused)}")
    if format == SuggestFormat.json:
        if len(paths) == 1 and len(files) == 1:
            print(reports[0].model_dump_json(indent=2))
        else:
            print(json.dumps({"files": [json.loads(r.model_dump_json()) for r in reports], "summary": _summary(reports, skipped)}, indent=2))
    elif format == SuggestFormat.sarif:
        from patterns.retriever.sarif import to_sarif

        print(json.dumps(to_sarif(reports, load_library(), catalog_url), indent=2))
    else:
        for r in reports:
            _print_report(r)
        console.print()
        for line in _wrap(_summary_line(_summary(reports, skipped)), "", console.width):
            console.print(line, highlight=False, soft_wrap=True, markup=False)
    if failing and _fails(reports, failing):
        raise typer.Exit(1)


def _label(k) -> str:
    """The bottleneck class, or 'unknown' when the estimate could not size the kernel."""
    b = k.bottleneck
    if b.source == "estimate" and "programs" not in b.numbers and b.rationale and b.rationale[0].startswith("bottleneck unknown"):
        return "unknown"
    return b.cls.value


def _summary(reports, skipped: int) -> dict:
    from collections import Counter

    kernels = [k for r in reports for k in r.kernels]
    return {"files": len(reports), "files_without_kernels": skipped, "kernels": len(kernels),
            "suggestions": sum(len(k.suggestions) for k in kernels),
            "bottlenecks": dict(Counter(_label(k) for k in kernels).most_common()),
            "triton": reports[0].triton if reports else None}


def _summary_line(s: dict) -> str:
    classes = ", ".join(f"{n} {c}" for c, n in s["bottlenecks"].items())
    skipped = f" ({s['files_without_kernels']} without kernels skipped)" if s["files_without_kernels"] else ""
    triton = f"; assumed Triton {s['triton']}" if s.get("triton") else "; Triton not installed: no version gate applied"
    return f"{s['files']} file(s){skipped}, {s['kernels']} kernel(s): {classes or 'none'}; {s['suggestions']} suggestion(s){triton}"


def _fails(reports, failing: set[str]) -> bool:
    for r in reports:
        for k in r.kernels:
            if "any" in failing and k.suggestions:
                return True
            if _label(k) in failing:
                return True
    return False


def _wrap(text: str, indent: str, width: int) -> list[str]:
    import textwrap

    return textwrap.wrap(text, width=max(40, width), initial_indent=indent, subsequent_indent=indent,
                         break_long_words=False, break_on_hyphens=False) or [indent]


def _field(label: str, text: str, width: int, style: str = "") -> None:
    import textwrap

    from rich.markup import escape

    for line in textwrap.wrap(text, width=max(40, width), initial_indent=f"     {label}: ", subsequent_indent=" " * 7,
                              break_long_words=False, break_on_hyphens=False):
        console.print(f"[{style}]{escape(line)}[/]" if style else escape(line), highlight=False, soft_wrap=True)


def _print_report(report) -> None:
    """Plain lines that fit the terminal (80 columns in a pipe): ids on their own line, never cut."""
    from rich.markup import escape

    from patterns.core.user_evidence import describe

    width = console.width
    for k in report.kernels:
        b = k.bottleneck
        console.print(f"\n[bold]{escape(k.kernel)}[/] [dim]{escape(k.path)}:{k.line} · {k.gpu} · {b.source}[/]", highlight=False, soft_wrap=True)
        unknown = _label(k) == "unknown"
        label = "bottleneck unknown" if unknown else b.cls.value
        text = "; ".join(b.rationale)
        if unknown:
            text = text[len("bottleneck unknown: "):]
        for i, line in enumerate(_wrap(f"{label}: {text}", "  ", width)):
            console.print(f"[bold yellow]{escape(line)}[/]" if i == 0 else escape(line), highlight=False, soft_wrap=True)
        for o in k.other_bottlenecks:
            for line in _wrap(f"{o.cls.value}: " + "; ".join(o.rationale), "  ", width):
                console.print(escape(line), highlight=False, soft_wrap=True)
        if k.suggestions:
            for i, s in enumerate(k.suggestions, 1):
                console.print(f"  {i}. [bold]{s.pattern_id}[/]", highlight=False, soft_wrap=True)
                rewrite = s.rewrite or "by hand"
                if s.rewrite and s.rewrite_refusal:
                    rewrite = f"{s.rewrite} would likely refuse: {s.rewrite_refusal}"
                elif s.rewrite and not s.rewrite_checked:
                    rewrite = f"{s.rewrite} (preconditions not checked: --check-rewrites)"
                meta = f"{s.title} · score {s.score:.2f} · {s.safety.value} · rewrite: {rewrite}"
                for line in _wrap(meta, "     ", width):
                    console.print(f"[dim]{escape(line)}[/]", highlight=False, soft_wrap=True)
                for m in s.matched[:4]:
                    _field("why", m, width)
                if s.expected_effect:
                    _field("effect", s.expected_effect, width)
                ev = [f"{u.project} {u.path}:{u.lines[0]}" for u in s.upstream[:2]]
                ev += [f"measured: {describe(m)}" for m in s.measured[:1]]
                ev += [f"yours: {describe(m)}" for m in s.local_measured[-1:]]
                if ev:
                    _field("evidence", "; ".join(ev), width, style="dim")
        else:
            console.print("  [dim]no pattern in the library passes the applicability gates for this kernel[/]")
        if k.already_applied:
            text = "already applied: " + ", ".join(f"{s.pattern_id} (line {s.lines[0]})" if s.lines else s.pattern_id for s in k.already_applied)
            for line in _wrap(text, "  ", width):
                console.print(escape(line), highlight=False, soft_wrap=True)


@app.command("index")
def index_cmd(
    chroma_url: Optional[str] = typer.Option(None, "--chroma-url", help="build in a ChromaDB server instead of the embedded index"),
    path: Optional[Path] = typer.Option(None, "--path", help="embedded index folder (default: the user cache)"),
) -> None:
    """Build or refresh the library's embedding index (incremental, by content hash)."""
    from patterns.core.files import writable_folder
    from patterns.retriever.index import build_index

    if path is not None:
        writable_folder(path, "the index")

    with _progress() as progress:
        stats = build_index(load_library(), chroma_url=chroma_url, path=path, progress=progress)
    console.print(f"index {stats.where}: {stats.added} added, {stats.updated} updated, {stats.removed} removed, {stats.unchanged} unchanged")


# --------------------------------------------------------------------------------------
# rewriting
# --------------------------------------------------------------------------------------


@app.command("apply")
def apply_cmd(
    pattern_id: str = typer.Argument(..., metavar="PATTERN_ID", help="pattern to apply, e.g. tf32x3_dot_precision"),
    path: Path = typer.Argument(..., metavar="FILE", help="kernel file to rewrite"),
    kernel: Optional[str] = typer.Option(None, "--kernel", help="kernel to rewrite when the file has several"),
    param: list[str] = typer.Option([], "--param", help="rewrite parameter NAME=VALUE (see `patterns show`)"),
    write: bool = typer.Option(False, "--write", help="write the change (atomically, keeping FILE.orig) instead of printing the diff"),
) -> None:
    """Apply a pattern's automatic rewrite: prints a unified diff, or writes it with --write."""
    params = {}
    for item in param:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise UsageError(f"--param: expected NAME=VALUE, got '{item}'")
        params[name] = value
    r = api.apply_pattern(pattern_id, path, kernel=kernel, params=params, write=write)
    if not r["applied"]:
        err_console.print(f"no-op: {r['no_op']}", markup=False, highlight=False, soft_wrap=True)
        return
    for w in r["warnings"]:
        err_console.print(f"warning: {w}", markup=False, highlight=False)
    if not write:
        sys.stdout.write(r["diff"])
        err_console.print(f"{r['pattern_id']} on {r['kernel'] or 'host code'}: safety {r['safety']} — {r['review']}", highlight=False)
        return
    err_console.print(f"wrote {path} (backup {r['backup']}); safety {r['safety']} — {r['review']}", highlight=False)


# --------------------------------------------------------------------------------------
# distilling upstream code (patterns.distill)
# --------------------------------------------------------------------------------------

from patterns.distill.cli import distill_command, drafts_app  # noqa: E402

app.command("distill")(distill_command)
app.add_typer(drafts_app, name="drafts")


@drafts_app.command("promote")
def drafts_promote(draft_id: str = typer.Argument(..., metavar="ID"), drafts: Optional[Path] = typer.Option(None, "--drafts", help="drafts folder (default: the user data directory)"),
                   library: Optional[Path] = typer.Option(None, "--library", help="library folder (default: the bundled one)")) -> None:
    """Move a reviewed draft into the library, once its prose and runnable examples exist and the checks pass."""
    from patterns.distill.drafts import drafts_dir, promote
    from patterns.core.library import library_dir
    from patterns.rewriter import REWRITES

    target = promote(drafts_dir(drafts), draft_id, library or library_dir(), rewrites=REWRITES)
    console.print(f"promoted {draft_id} to {target}")



# --------------------------------------------------------------------------------------
# validation (the command lives with the gate)
# --------------------------------------------------------------------------------------


@app.command("validate")
def validate_cmd(
    op: str = typer.Argument(..., help="op under kernels/ (e.g. kda_decode), or a path to an op's spec.py"),
    candidate: Optional[Path] = typer.Argument(None, help="candidate file: a rewritten copy of the op's baseline.py (default: the baseline itself)"),
    out: Path = typer.Option(Path("evidence"), "--out", "-o", help="folder for the evidence bundle (JSON + Markdown)"),
    device: str = typer.Option("auto", help="auto, cpu (Triton interpreter) or cuda"),
    format: str = typer.Option("table", "--format", "-f", help="table, json or markdown"),
    pattern: Optional[str] = typer.Option(None, "--pattern", help="the pattern the candidate applies: its max_cost sets the speed rule"),
    ray: Optional[str] = typer.Option(None, "--ray", metavar="[ADDRESS]", help="run the gate as a Ray task on the cluster at ADDRESS; alone: a Ray instance started here"),
    ray_resource: Optional[str] = typer.Option(None, "--ray-resource", metavar="NAME=N", help="with --ray: the task asks for N units of this custom resource instead of one GPU"),
    timeout: Optional[float] = typer.Option(None, "--timeout", min=1, help="seconds for the whole validation (default: the op's timeout_s); past it the candidate is rejected"),
) -> None:
    """Compare a candidate with the op's baseline and reference; write an evidence bundle."""
    # imported here: the gate pulls in torch, which `suggest` must not pay for
    from patterns.validation.cli import validate_command

    gate = None
    if ray is not None:
        import functools

        from patterns.agent.fanout import validate_remote

        gate = functools.partial(validate_remote, address=ray, resource=ray_resource)
    elif ray_resource is not None:
        raise UsageError("--ray-resource: only with --ray")
    validate_command(op, candidate, out=out, device=device, format=format, pattern=pattern, timeout=timeout, gate=gate)


# --------------------------------------------------------------------------------------
# the user's own kernels: a spec for the gate (patterns.specinit) and the user's evidence
# --------------------------------------------------------------------------------------

spec_app = typer.Typer(name="spec", help="Specs for your own kernels: what the gate and the agent need to know.", no_args_is_help=True)
app.add_typer(spec_app, name="spec")


def _sizes(items: list[str], option: str) -> tuple[dict[str, int], ...]:
    """`N=4096,D=128` per item -> a shape dict each."""
    out = []
    for item in items:
        shape = {}
        for part in item.split(","):
            name, sep, value = part.partition("=")
            if not sep or not name.strip() or not value.strip().lstrip("-").isdigit():
                raise UsageError(f"{option}: expected NAME=INT[,NAME=INT...], got '{item}'")
            shape[name.strip()] = int(value)
        out.append(shape)
    return tuple(out)


@spec_app.command("init")
def spec_init_cmd(
    kernel_file: Path = typer.Argument(..., metavar="KERNEL.py", help="your file with @triton.jit kernels and the launcher"),
    kernel: Optional[str] = typer.Option(None, "--kernel", help="the launcher (the Python function that launches the kernel), when the file has several"),
    reference: Optional[str] = typer.Option(None, "--reference", help="the plain PyTorch reference, MODULE:FUNC (a dotted module or a .py path)"),
    reference_file: Optional[str] = typer.Option(None, "--reference-file", help="a .py file with the reference (FUNC: `reference`, the launcher's name or its one function; ref.py:FUNC to choose); it may define make_inputs, bytes_moved, flops"),
    shape: list[str] = typer.Option([], "--shape", help="a tensor parameter's dimensions, NAME=DIMS (repeat): x=N,D  weight=D  state=B,H,64,64"),
    dtype: list[str] = typer.Option([], "--dtype", help="activation dtype to check (repeat; default float32 and bfloat16), or NAME=DTYPE for one tensor"),
    gpu_dtype: list[str] = typer.Option([], "--gpu-dtype", help="activation dtype on the GPU (repeat; default: the 16-bit ones of --dtype)"),
    value: list[str] = typer.Option([], "--value", help="a non-tensor parameter, NAME=LITERAL (repeat): eps=1e-6 causal=True"),
    gpu_shape: list[str] = typer.Option([], "--gpu-shape", help="sizes timed on the GPU, N=4096,D=4096 (repeat)"),
    cpu_shape: list[str] = typer.Option([], "--cpu-shape", help="sizes checked under the interpreter (repeat; default: small odd sizes derived from the GPU shapes)"),
    inplace: list[str] = typer.Option([], "--inplace", help="an input the launcher writes (an output buffer, a state), compared as an output (repeat)"),
    scratch: list[str] = typer.Option([], "--scratch", help="an input the launcher may overwrite as working memory, not compared (repeat)"),
    storage: list[str] = typer.Option([], "--storage", help="a tensor's dimensions in memory order, NAME=DIMS (repeat): q=B,T,H,D for a [B, H, T, D] view of [B, T, H, D] memory"),
    accumulation: str = typer.Option("float32", "--accumulation", help="the dtype its sums must accumulate in: results are held to a float64 reference within what it allows"),
    reduction: Optional[str] = typer.Option(None, "--reduction", help="the dimension its sums run over (default: the shape's largest size)"),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="where to write the spec (default: spec.py beside KERNEL.py)"),
    force: bool = typer.Option(False, "--force", help="replace an existing spec"),
    check: bool = typer.Option(True, "--check/--no-check", help="call the reference and the launcher once on the smallest CPU shape (child process, time limit)"),
) -> None:
    """Write a spec for your kernel, so `validate`, `agent` and `review` take it like a built-in op."""
    from patterns.specinit import Request, _parse_value, init_spec

    def named_dims(items: list[str], flag: str) -> dict[str, tuple]:
        out: dict[str, tuple] = {}
        for item in items:
            name, sep, text = item.partition("=")
            if not sep or not name or not text:
                raise UsageError(f"{flag}: expected NAME=DIM[,DIM...], got '{item}'")
            out[name] = tuple(int(d) if d.strip().isdigit() else d.strip() for d in text.split(","))
        return out

    dims, layouts = named_dims(shape, "--shape"), named_dims(storage, "--storage")
    grid, pinned = [], {}
    for item in dtype:
        name, sep, kind = item.partition("=")
        if sep:
            pinned[name] = kind
        else:
            grid.append(item)
    values = {}
    for item in value:
        name, sep, text = item.partition("=")
        if not sep or not name:
            raise UsageError(f"--value: expected NAME=LITERAL, got '{item}'")
        values[name] = _parse_value(text)
    req = Request(kernel=kernel_file, launcher=kernel, reference=reference, reference_file=reference_file, shapes=dims,
                  dtypes=tuple(grid), gpu_dtypes=tuple(gpu_dtype), pinned=pinned, storage=layouts, values=values, gpu_shapes=_sizes(gpu_shape, "--gpu-shape"),
                  cpu_shapes=_sizes(cpu_shape, "--cpu-shape"), inplace=tuple(inplace), scratch=tuple(scratch),
                  accumulation=accumulation, reduction=reduction, out=out, force=force)
    with err_console.status(f"checking {kernel_file.name} against its reference…"):
        path = init_spec(req, check=check)
    console.print(f"wrote {path}" + (" (checked: reference and launcher agree on the outputs' shapes)" if check else " (not checked)"), highlight=False, soft_wrap=True)
    console.print(f"next: patterns validate {path} · patterns agent {path}", highlight=False, soft_wrap=True)


evidence_app = typer.Typer(name="evidence", help="Your own evidence: what accepted reviews measured on your kernels, kept apart from the library.", no_args_is_help=True)
app.add_typer(evidence_app, name="evidence")


@evidence_app.command("list")
def evidence_list_cmd(
    pattern_id: Optional[str] = typer.Option(None, "--pattern", help="only this pattern"),
    format: Format = typer.Option(Format.table, "--format", help="table or json"),
) -> None:
    """Your evidence records, per pattern (speed only from GPU bundles; CPU results are error ratios)."""
    from patterns.core.schema import Measurement
    from patterns.core.user_evidence import describe, evidence_home

    rows = api.evidence_records(pattern_id)
    if format == Format.json:
        print(json.dumps(rows, indent=2))
        return
    table = Table(title=f"{len(rows)} evidence records in {evidence_home()}", title_justify="left")
    for col in ("pattern", "result", "shapes", "target", "review item"):
        table.add_column(col, overflow="fold", no_wrap=col == "review item")
    for r in rows:
        table.add_row(r["pattern_id"], describe(Measurement.model_validate(r["measurement"])), r["measurement"]["shapes"], r["target"], r["item"])
    console.print(table)


@evidence_app.command("export")
def evidence_export_cmd(
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="write the patch here (default: stdout)"),
    pattern_id: Optional[str] = typer.Option(None, "--pattern", help="only this pattern"),
    metric: Optional[str] = typer.Option(None, "--metric", help="only this metric (speedup: GPU speed ratios; max-rel-err-vs-baseline: error ratios)"),
) -> None:
    """A patch adding your measurements to the library's pattern.yaml files, for a maintainer to review and `git apply`."""
    from patterns.core import files

    patch, bundles = api.evidence_patch(pattern_id, metric)
    if not patch:
        err_console.print("nothing to export: no record of yours is missing from the library", highlight=False)
        return
    if out is None:
        sys.stdout.write(patch)
    else:
        files.write_atomic(out, patch.encode())
        err_console.print(f"wrote {out}: review it, then `git apply {out}` in the checkout", highlight=False, soft_wrap=True)
    if bundles:
        err_console.print("the evidence bundles it cites (commit them beside the change):\n  " + "\n  ".join(dict.fromkeys(bundles)), highlight=False, soft_wrap=True)


# --------------------------------------------------------------------------------------
# serving (patterns.serving.cli), agent and review (patterns.agent.cli); heavy imports inside the commands
# --------------------------------------------------------------------------------------

from patterns.agent.cli import agent_app, review_app  # noqa: E402
from patterns.serving.cli import serving_app  # noqa: E402

app.add_typer(serving_app, name="serving")
app.add_typer(review_app, name="review")
app.add_typer(agent_app, name="agent")


# --------------------------------------------------------------------------------------
# coding agents: the MCP server and the agent skill (patterns.mcp_server, patterns.skill)
# --------------------------------------------------------------------------------------


@app.command("mcp")
def mcp_cmd(
    root: Path = typer.Option(Path("."), "--root", help="folder whose files the tools read relative paths from and `apply`/`validate` may write in"),
    http: Optional[str] = typer.Option(None, "--http", metavar="[HOST:]PORT", help="serve streamable HTTP at http://HOST:PORT/mcp (loopback only) instead of stdio"),
    host: Optional[str] = typer.Option(None, "--host", help="bind this interface for --http, even one other machines reach"),
    chroma_url: Optional[str] = typer.Option(None, "--chroma-url", help="use a ChromaDB server for suggest and search"),
) -> None:
    """Serve the library to coding agents over MCP: suggest, show, search, list, apply, validate, review tools and a resource per pattern."""
    from patterns.mcp_server import serve

    if host is not None and http is None:
        raise UsageError("--host: only with --http")
    serve(root, http=http, host=host, chroma_url=chroma_url, announce=lambda line: err_console.print(line, highlight=False, soft_wrap=True))


skill_app = typer.Typer(name="skill", help="The library as an agent skill (SKILL.md with reference files).", no_args_is_help=True)
app.add_typer(skill_app, name="skill")


@skill_app.command("export")
def skill_export_cmd(out: Path = typer.Argument(..., metavar="DIR", help="folder for the skill (an empty one, or an earlier export, which is replaced)")) -> None:
    """Write SKILL.md, references/<id>.md per pattern and the decision table; re-exports are byte-identical."""
    from patterns.skill import export_skill

    skill = export_skill(load_library(), out)
    console.print(f"skill written: {skill}", highlight=False, soft_wrap=True)


# --------------------------------------------------------------------------------------
# entry point
# --------------------------------------------------------------------------------------

def ray_address_optional(argv: list[str]) -> list[str]:
    """`--ray` may stand alone (a Ray instance on this host): `--ray` not followed by an address is `--ray=local`."""
    out = []
    for i, arg in enumerate(argv):
        if arg == "--ray" and not (i + 1 < len(argv) and _RAY_ADDRESS.match(argv[i + 1])):
            arg = "--ray=local"
        out.append(arg)
    return out


_RAY_ADDRESS = re.compile(r"^(auto|local|(ray://)?[A-Za-z0-9_.\-\[\]:]+:\d+)$")


def main(argv: list[str] | None = None) -> None:
    # typer handles usage errors itself (exit 2); ours are one line, exit 2, no traceback
    argv = ray_address_optional(sys.argv[1:] if argv is None else list(argv))
    try:
        app(args=argv)
    except Exception as exc:  # SystemExit (typer's normal exit) is not an Exception: no imports on success
        if not isinstance(exc, api.user_errors()):
            raise
        err_console.print(f"error: {exc}", markup=False, highlight=False, soft_wrap=True)
        sys.exit(2)


if __name__ == "__main__":
    main()
