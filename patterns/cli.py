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

from patterns.core.library import Entry, LibraryError, check_entry, get, load_library
from patterns.core.schema import BottleneckClass, Category, Safety, Status

app = typer.Typer(
    name="patterns",
    help="Optimization patterns for GPU kernels: find the technique that fits a kernel's bottleneck.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
console = Console()
err_console = Console(stderr=True)


class UsageError(ValueError):
    """Bad command-line input; one line, exit 2."""


class Format(str, Enum):
    table = "table"
    json = "json"


# --------------------------------------------------------------------------------------
# browsing
# --------------------------------------------------------------------------------------


def _filter(
    entries: list[Entry],
    category: Category | None,
    bottleneck: BottleneckClass | None,
    project: str | None,
    safety: Safety | None,
    status: Status | None,
) -> list[Entry]:
    out = []
    for e in entries:
        p = e.pattern
        if category and p.category != category:
            continue
        if bottleneck and bottleneck not in p.applies_when.bottlenecks:
            continue
        if project and project not in p.projects:
            continue
        if safety and p.safety != safety:
            continue
        if status and p.status != status:
            continue
        out.append(e)
    return out


def _summary_row(e: Entry) -> dict:
    p = e.pattern
    return {
        "id": p.id,
        "title": p.title,
        "category": p.category.value,
        "status": p.status.value,
        "safety": p.safety.value,
        "bottlenecks": [b.value for b in p.applies_when.bottlenecks],
        "projects": p.projects,
        "rewrite": p.transformation.rewrite,
        "summary": p.summary,
    }


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
    entries = _filter(load_library(), category, bottleneck, project, safety, status)
    if format == Format.json:
        print(json.dumps([_summary_row(e) for e in entries], indent=2))
        return
    table = Table(title=f"{len(entries)} patterns", title_justify="left", show_lines=False)
    table.add_column("id", no_wrap=True)
    for col in ("category", "safety", "bottlenecks", "upstream", "rewrite"):
        table.add_column(col, overflow="fold")
    for e in entries:
        r = _summary_row(e)
        table.add_row(
            f"[bold]{r['id']}[/]\n[dim]{r['title']}[/]",
            r["category"],
            r["safety"],
            ", ".join(r["bottlenecks"]),
            ", ".join(r["projects"]),
            r["rewrite"] or "[dim]by hand[/]",
        )
    console.print(table)


def example_diff(e: Entry) -> str:
    import difflib

    before = e.file("before.py").read_text().splitlines(keepends=True)
    after = e.file("after.py").read_text().splitlines(keepends=True)
    return "".join(difflib.unified_diff(before, after, f"{e.id}/before.py", f"{e.id}/after.py"))


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

    e = get(pattern_id)
    p = e.pattern
    if format == Format.json:
        print(json.dumps(p.model_dump(mode="json"), indent=2))
        return
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
    if p.evidence.measured:
        t = Table("hardware", "shapes", "baseline", "candidate", "ratio", "command")
        for m in p.evidence.measured:
            t.add_row(m.hardware, m.shapes, m.baseline, m.candidate, f"{m.ratio:.2f}", m.command)
        console.print(t)
    else:
        console.print("  [dim]no measured results yet[/]")
    if p.traps:
        console.print(Markdown("## Traps"))
        for t in p.traps:
            console.print(f"  • [bold]{t.fact}[/]\n    why: {t.why}\n    how: {t.how}")
    if e.has_examples():
        console.print(Markdown("## Before → after"))
        console.print(Syntax(example_diff(e), "diff", theme="ansi_dark", word_wrap=True))


def _tokens(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


def keyword_scores(query: str, entries: list[Entry]) -> list[tuple[float, Entry]]:
    """Weighted term overlap: title and tags count more than prose."""
    q = set(_tokens(query))
    scored = []
    for e in entries:
        p = e.pattern
        fields = [
            (3.0, p.id.replace("_", " ") + " " + p.title),
            (2.0, " ".join(p.tags) + " " + p.summary),
            (1.0, p.why + " " + p.transformation.method + " " + " ".join(b.value for b in p.applies_when.bottlenecks)),
        ]
        score = 0.0
        for weight, text in fields:
            toks = _tokens(text)
            if toks:
                score += weight * sum(1 for t in q if t in toks) / len(q)
        if score > 0:
            scored.append((score, e))
    return sorted(scored, key=lambda x: -x[0])


def _search(text: str, entries: list[Entry], chroma_url: str | None) -> list[tuple[float, Entry]]:
    """Cosine similarity from the index, plus a small bonus for literal keyword hits."""
    from patterns.retriever.index import similarities

    with _progress() as progress:
        sims = similarities(text, entries, chroma_url=chroma_url, progress=progress)
    kw = {e.id: s for s, e in keyword_scores(text, entries)}
    top_kw = max(kw.values(), default=1.0) or 1.0
    scored = [(sims.get(e.id, 0.0) + 0.15 * kw.get(e.id, 0.0) / top_kw, e) for e in entries]
    return sorted(scored, key=lambda x: -x[0])


@app.command("search")
def search_cmd(
    text: str = typer.Argument(..., help="what you are looking for, e.g. 'decode under-fills the GPU'"),
    top: int = typer.Option(8, help="how many results"),
    format: Format = typer.Option(Format.table, "--format"),
    chroma_url: Optional[str] = typer.Option(None, "--chroma-url", help="use a ChromaDB server instead of the embedded index"),
    keyword: bool = typer.Option(False, "--keyword", help="keyword matching only (no index)"),
) -> None:
    """Search the library: semantic (embedding index) blended with keyword matches."""
    results = (keyword_scores(text, load_library()) if keyword else _search(text, load_library(), chroma_url))[:top]
    if format == Format.json:
        print(json.dumps([{"score": round(s, 3), **_summary_row(e)} for s, e in results], indent=2))
        return
    if not results:
        console.print(f"no pattern matches '{text}'")
        return
    table = Table("score", "id", "summary", title=f"search: {text}", title_justify="left")
    table.columns[1].no_wrap = True
    for s, e in results:
        table.add_row(f"{s:.2f}", f"[bold]{e.id}[/]\n[dim]{e.pattern.category.value}[/]", e.pattern.summary)
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
        if shapes[name.strip()] <= 0:
            raise UsageError(f"--shape: {name}: must be positive, got {value}")
    return shapes


def _parse_dtypes(items: list[str]) -> tuple[str, dict[str, str]]:
    from patterns.retriever.estimate import DTYPE_BYTES

    default, overrides = "bfloat16", {}
    for item in items:
        name, sep, value = item.rpartition("=")
        if value not in DTYPE_BYTES:
            raise UsageError(f"--dtype: unknown dtype '{value}' (known: {', '.join(sorted(DTYPE_BYTES))})")
        if sep:
            overrides[name] = value
        else:
            default = value
    return default, overrides


def _progress():
    from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    return Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                    TimeElapsedColumn(), console=err_console, transient=True)


@app.command("suggest")
def suggest_cmd(
    path: Path = typer.Argument(..., metavar="KERNEL.py", help="Python file with @triton.jit kernels and their launchers"),
    kernel: Optional[str] = typer.Option(None, "--kernel", help="only this kernel of the file"),
    shape: list[str] = typer.Option([], "--shape", help="shape variable, NAME=INT (repeat): B=8 T=1 H=32 K=128"),
    dtype: list[str] = typer.Option([], "--dtype", help="element type of the tensors (default bf16), or PARAM=DTYPE for one pointer"),
    profile: Optional[Path] = typer.Option(None, "--profile", help="ncu --csv --page raw export, torch.profiler trace, or evidence bundle"),
    arch: str = typer.Option("h200", "--arch", help="target GPU: h200, h100, a100, b200, mi300x"),
    top: int = typer.Option(5, "--top", min=1, help="suggestions per kernel"),
    format: SuggestFormat = typer.Option(SuggestFormat.table, "--format", help="table, json (docs/suggest.schema.json) or sarif"),
    chroma_url: Optional[str] = typer.Option(None, "--chroma-url", help="use a ChromaDB server (http://127.0.0.1:PORT) instead of the embedded index"),
) -> None:
    """Find the patterns that fit each kernel's bottleneck, with the evidence behind them."""
    from patterns.core.hardware import gpu
    from patterns.retriever.retrieve import suggest

    gpu(arch)  # unknown --arch fails before any work
    shapes = _parse_shapes(shape)
    default_dtype, overrides = _parse_dtypes(dtype)
    if not path.exists():
        raise UsageError(f"{path}: no such file")
    entries = load_library()
    with _progress() as progress:
        report = suggest(path, kernel=kernel, shapes=shapes, arch=arch, dtype=default_dtype, dtype_overrides=overrides,
                         profile=profile, top=top, chroma_url=chroma_url, entries=entries, progress=progress)
    if format == SuggestFormat.json:
        print(report.model_dump_json(indent=2))
        return
    if format == SuggestFormat.sarif:
        from patterns.retriever.sarif import to_sarif

        print(json.dumps(to_sarif(report, entries), indent=2))
        return
    _print_report(report)


def _print_report(report) -> None:
    for k in report.kernels:
        b = k.bottleneck
        console.print(f"\n[bold]{k.kernel}[/] [dim]{k.path}:{k.line} · {k.gpu} · {b.source}[/]")
        console.print(f"  [bold yellow]{b.cls.value}[/]: " + "; ".join(b.rationale), highlight=False)
        for o in k.other_bottlenecks:
            console.print(f"  [yellow]{o.cls.value}[/]: " + "; ".join(o.rationale), highlight=False)
        if k.suggestions:
            t = Table(show_lines=True, expand=True)
            t.add_column("#", width=2)
            t.add_column("pattern", ratio=2)
            t.add_column("why it applies", ratio=3)
            t.add_column("expected effect", ratio=3)
            t.add_column("safety / evidence", ratio=2)
            for i, s in enumerate(k.suggestions, 1):
                ev = [f"{u.project} {u.path}:{u.lines[0]}" for u in s.upstream[:2]]
                ev += [f"measured {m.ratio:.2f}× on {m.hardware}" for m in s.measured[:1]]
                t.add_row(
                    str(i),
                    f"[bold]{s.pattern_id}[/]\n{s.title}\n[dim]score {s.score:.2f} · rewrite: {s.rewrite or 'by hand'}[/]",
                    "\n".join(s.matched[:4]),
                    s.expected_effect or "-",
                    f"{s.safety.value}\n[dim]" + "\n".join(ev) + "[/]",
                )
            console.print(t)
        else:
            console.print("  [dim]no pattern in the library passes the applicability gates for this kernel[/]")
        if k.already_applied:
            console.print("  already applied: " + ", ".join(f"{s.pattern_id} (line {s.lines[0]})" if s.lines else s.pattern_id for s in k.already_applied), highlight=False)


@app.command("index")
def index_cmd(
    chroma_url: Optional[str] = typer.Option(None, "--chroma-url", help="build in a ChromaDB server instead of the embedded index"),
    path: Optional[Path] = typer.Option(None, "--path", help="embedded index folder (default: the user cache)"),
) -> None:
    """Build or refresh the library's embedding index (incremental, by content hash)."""
    from patterns.retriever.index import build_index

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
    from patterns.rewriter.base import AlreadyApplied, apply, write_candidate

    if not path.is_file():
        raise UsageError(f"{path}: no such file")
    params = {}
    for item in param:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise UsageError(f"--param: expected NAME=VALUE, got '{item}'")
        params[name] = value
    try:
        source = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise UsageError(f"{path}: not UTF-8 text") from None
    try:
        applied = apply(pattern_id, source, str(path), kernel=kernel, params=params)
    except AlreadyApplied as exc:
        err_console.print(f"no-op: {exc}", markup=False, highlight=False, soft_wrap=True)
        return
    c = applied.candidate
    for w in applied.warnings:
        err_console.print(f"warning: {w}", markup=False, highlight=False)
    if not write:
        sys.stdout.write(c.diff)
        err_console.print(f"{c.pattern_id} on {c.kernel or 'host code'}: safety {c.safety.value} — {c.safety.review}", highlight=False)
        return
    backup = write_candidate(c, path)
    err_console.print(f"wrote {path} (backup {backup}); safety {c.safety.value} — {c.safety.review}", highlight=False)


# --------------------------------------------------------------------------------------
# distilling upstream code (patterns.distill)
# --------------------------------------------------------------------------------------

from patterns.distill.cli import distill_command  # noqa: E402
from patterns.distill.errors import DistillError  # noqa: E402

app.command("distill")(distill_command)


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
) -> None:
    """Compare a candidate with the op's baseline and reference; write an evidence bundle."""
    # imported here: the gate pulls in torch, which `suggest` must not pay for
    from patterns.validation.cli import validate_command

    validate_command(op, candidate, out=out, device=device, format=format, pattern=pattern)


# --------------------------------------------------------------------------------------
# serving (patterns.serving.cli), agent and review (patterns.agent.cli); heavy imports inside the commands
# --------------------------------------------------------------------------------------

from patterns.agent.cli import agent_command, review_app  # noqa: E402
from patterns.serving.cli import serving_app  # noqa: E402

app.add_typer(serving_app, name="serving")
app.add_typer(review_app, name="review")
app.command("agent")(agent_command)


# --------------------------------------------------------------------------------------
# entry point
# --------------------------------------------------------------------------------------

_USER_ERRORS: tuple[type[BaseException], ...] = (LibraryError, UsageError, DistillError)


def _user_errors() -> tuple[type[BaseException], ...]:
    from patterns.core.facts import FactsError
    from patterns.retriever.embedding import EmbeddingError
    from patterns.retriever.index import IndexError_
    from patterns.retriever.profile import ProfileError
    from patterns.retriever.retrieve import RetrieveError

    from patterns.core.hardware import UnknownGPU
    from patterns.catalog import CatalogError
    from patterns.rewriter.base import RewriteError
    from patterns.serving.registry import RegistryError
    from patterns.agent.journal import JournalError
    from patterns.agent.loop import AgentError
    from patterns.agent.review import ReviewError

    return (RegistryError, AgentError, ReviewError, JournalError, RewriteError, CatalogError, *_USER_ERRORS, FactsError, RetrieveError, ProfileError, IndexError_, EmbeddingError, UnknownGPU)


def main(argv: list[str] | None = None) -> None:
    # typer handles usage errors itself (exit 2); ours are one line, exit 2, no traceback
    try:
        app(args=argv)
    except Exception as exc:  # SystemExit (typer's normal exit) is not an Exception: no imports on success
        if not isinstance(exc, _user_errors()):
            raise
        err_console.print(f"error: {exc}", markup=False, highlight=False, soft_wrap=True)
        sys.exit(2)


if __name__ == "__main__":
    main()
