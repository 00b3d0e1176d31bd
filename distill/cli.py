"""`patterns distill SOURCE...`: upstream kernel code -> evidence for the library, and drafts."""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.syntax import Syntax
from rich.table import Table

from patterns.distill.errors import DistillError

console = Console()
err_console = Console(stderr=True)


class _Bar:
    """One rich task per project; phases: read, extract, link, detect."""

    def __init__(self, progress: Progress):
        self.progress = progress

    def callback(self, label: str):
        task = self.progress.add_task(label, total=1)

        def update(phase: str, done: int, total: int) -> None:
            self.progress.update(task, description=f"{label}: {phase}", completed=done, total=max(total, 1))

        return update


def distill_command(
    sources: list[str] = typer.Argument(..., metavar="SOURCE", help="folder, wheel/sdist, installed package, or PyPI requirement (fla-core==0.6.0)"),
    write: bool = typer.Option(False, "--write", help="merge the evidence into the library's pattern.yaml files (diff shown first)"),
    drafts: Optional[Path] = typer.Option(None, "--drafts", help="folder for draft skeletons (default: the user data directory; see `patterns drafts list`)"),
    format: str = typer.Option("table", "--format", help="table or json"),
    library: Optional[Path] = typer.Option(None, "--library", help="library folder (default: the bundled one)"),
    no_cache: bool = typer.Option(False, "--no-cache", help="extract every file again (the cache is neither read nor written)"),
    jobs: int = typer.Option(0, "--jobs", help="worker processes for extraction (0: one per core)"),
    cap: int = typer.Option(5, "--cap", min=1, help="upstream locations written per pattern and project"),
    min_support: int = typer.Option(3, "--min-support", min=1, help="upstream locations a technique needs to become a draft"),
    max_drafts: int = typer.Option(100, "--max-drafts", min=0, help="drafts proposed at most"),
    llm: bool = typer.Option(True, "--llm/--no-llm", help="fill draft prose with the configured OpenAI-compatible endpoint"),
) -> None:
    """Distill upstream kernels: detect library patterns (evidence), propose drafts for what recurs unmatched."""
    from patterns.distill import merge
    from patterns.distill.cache import FactsCache
    from patterns.distill.run import DraftOut, distill, read_excerpt, write_drafts
    from patterns.core.library import load_library

    if format not in ("table", "json"):
        raise DistillError(f"--format: expected table or json, got '{format}'")
    entries = load_library(library)
    cache = FactsCache(enabled=not no_cache)
    n_jobs = jobs or min(os.cpu_count() or 1, 8)
    with Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                  TimeElapsedColumn(), console=err_console, transient=True) as progress:
        result = distill(sources, entries, cache, jobs=n_jobs, progress=_Bar(progress), min_support=min_support, max_drafts=max_drafts, cap=cap)
    report = result.report

    # drafts, with the LLM's prose where an endpoint is configured
    llm_status: dict[str, str] = {}
    cfg = None
    if llm and result.drafts:
        from patterns.distill.llm import LLMRejected, fill, load_config

        cfg = load_config()
        filled = []
        for d in result.drafts:
            if cfg is None:
                filled.append(d)
                continue
            excerpts = [(f"{u.project} {u.path}:{u.lines[0]}", read_excerpt(result.scans, u.project, u.path, u.lines)) for u in d.evidence.upstream[:3]]
            try:
                filled.append(fill(d, excerpts, cfg))
                llm_status[d.id] = "filled"
            except LLMRejected as exc:
                filled.append(d)
                llm_status[d.id] = f"rejected: {exc}"
                err_console.print(f"draft {d.id}: LLM answer rejected: {exc}", markup=False, highlight=False)
        result.drafts = filled
    from patterns.distill.drafts import drafts_dir

    paths = write_drafts(result.drafts, drafts_dir(drafts)) if result.drafts else []
    report.drafts = [
        DraftOut(id=d.id, path=str(p), title=d.title, signature=d.signature, support=d.support, contrast=d.contrast, locations=len(d.evidence.upstream),
                 llm=llm_status.get(d.id, "not configured" if cfg is None else "skipped"), missing=d.missing())
        for d, p in zip(result.drafts, paths)
    ]

    projects = {p.project: p.version for p in report.projects}
    problems: list[str] = []
    changes = merge.plan(entries, result.detections, projects, cap=cap, problems=problems)
    out = err_console if format == "json" else console
    for ch in changes:
        out.print(Syntax(ch.diff(), "diff", theme="ansi_dark", word_wrap=True))
    for line in problems:
        err_console.print(f"warning: {line}", markup=False, highlight=False)
    if write and problems:
        raise DistillError(f"{problems[0]}; nothing written" + (f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""))
    if write:
        merge.apply(changes)
        report.written = [str(ch.entry.file("pattern.yaml")) for ch in changes]
    if format == "json":
        print(report.model_dump_json(indent=2))
        return
    _print(report, entries, changes, write)


def _print(report, entries, changes, write: bool) -> None:
    t = Table(title="upstream projects", title_justify="left")
    for col in ("project", "version", "files", "scanned", "cached", "kernels", "native fns", "bindings", "skipped", "seconds"):
        t.add_column(col, justify="right" if col not in ("project", "version", "skipped") else "left")
    for p in report.projects:
        skipped = ", ".join(f"{n} {why}" for why, n in sorted(p.skipped.items(), key=lambda kv: -kv[1])) or "-"
        t.add_row(p.project, p.version, str(p.files_total), str(p.files_scanned), str(p.files_cached), str(p.kernels),
                  str(p.native_functions), str(p.bindings), skipped, f"{p.seconds:.1f}")
    console.print(t)
    d = Table(title="upstream locations per library pattern", title_justify="left")
    d.add_column("pattern", no_wrap=True)
    for p in report.projects:
        d.add_column(p.project, justify="right")
    for e in entries:
        d.add_row(e.id, *[str(p.detections.get(e.id, 0)) for p in report.projects])
    console.print(d)
    if report.drafts:
        dr = Table(title=f"{len(report.drafts)} draft skeletons (review with `patterns drafts list`)", title_justify="left")
        for col in ("draft", "support", "share", "LLM"):
            dr.add_column(col, overflow="fold")
        dr.columns[0].no_wrap = True
        for x in report.drafts:
            dr.add_row(x.id, ", ".join(f"{k} {v}" for k, v in x.support.items()), f"{x.contrast.get('share', 0):.1%}", x.llm)
        console.print(dr)
        console.print(f"drafts written to {Path(report.drafts[0].path).parent.parent}")
    if changes:
        verb = "written" if write else "would change (run with --write)"
        console.print(f"{len(changes)} pattern.yaml files {verb}: " + ", ".join(ch.entry.id for ch in changes))
    else:
        console.print("library evidence already up to date")
    if report.predicate_errors:
        console.print(f"[yellow]predicate errors[/]: {json.dumps(report.predicate_errors)}")
    console.print(f"[dim]{report.seconds:.1f} s, cache {report.cache_hits} hits / {report.cache_misses} misses[/]")


# --------------------------------------------------------------------------------------
# `patterns drafts list|show|promote`
# --------------------------------------------------------------------------------------

drafts_app = typer.Typer(help="Review draft skeletons proposed by `patterns distill`.", no_args_is_help=True)
_DRAFTS_OPT = typer.Option(None, "--drafts", help="drafts folder (default: the user data directory)")
# `promote` is registered by patterns.cli: its check asks the rewriter, which a stage does not import


@drafts_app.command("list")
def drafts_list(drafts: Optional[Path] = _DRAFTS_OPT, format: str = typer.Option("table", "--format", help="table or json")) -> None:
    """List drafts: id, upstream locations and projects, contrast, and what is still to write (--format json: all fields)."""
    from patterns.distill.drafts import drafts_dir, list_drafts

    if format not in ("table", "json"):
        raise DistillError(f"--format: expected table or json, got '{format}'")
    folder = drafts_dir(drafts)
    rows = []
    for path, d, problem in list_drafts(folder):
        if d is None:
            rows.append({"id": path.parent.name, "path": str(path), "problem": problem})
            continue
        rows.append({"id": d.id, "category": d.category.value, "title": d.title, "locations": len(d.evidence.upstream),
                     "support": d.support, "share": d.contrast.get("share", 0.0), "missing": d.missing(), "path": str(path)})
    if format == "json":
        print(json.dumps(rows, indent=2))
        return
    from patterns.distill.drafts import PROSE_FIELDS

    from rich import box

    t = Table(title=f"{len(rows)} drafts in {folder}", title_justify="left", box=box.SIMPLE_HEAD)
    short = {"sglang": "sgl", "deepgemm": "dg", "deepep": "ep"}
    for col in ("id", "locations", "from", "share", "to write"):
        t.add_column(col, no_wrap=col != "to write", justify="right" if col == "locations" else "left")
    for r in rows:
        if "problem" in r:
            t.add_row(r["id"], "-", "-", "-", r["problem"])
            continue
        todo = "prose" if sorted(r["missing"]) == sorted(PROSE_FIELDS) else (", ".join(r["missing"]) or "-")
        t.add_row(r["id"], str(sum(r["support"].values())), ",".join(short.get(k, k) for k in r["support"]), f"{r['share']:.1%}", todo)
    console.print(t)


@drafts_app.command("show")
def drafts_show(draft_id: str = typer.Argument(..., metavar="ID"), drafts: Optional[Path] = _DRAFTS_OPT,
                format: str = typer.Option("yaml", "--format", help="yaml or json")) -> None:
    """Print one draft: its skeleton, upstream locations and what a person still has to write."""
    from patterns.distill.drafts import drafts_dir, load_draft

    path, d = load_draft(drafts_dir(drafts), draft_id)
    if format == "json":
        print(d.model_dump_json(indent=2, exclude_none=True))
        return
    if format != "yaml":
        raise DistillError(f"--format: expected yaml or json, got '{format}'")
    sys.stdout.write(path.read_text(encoding="utf-8"))
    err_console.print(f"missing for the library: {', '.join(d.missing()) or 'nothing'}; {path}", markup=False, highlight=False)
