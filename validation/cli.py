"""`patterns validate OP [CANDIDATE]`: run the gate and show its evidence.

Exit codes: 0 the gate passed, 1 it failed, 2 bad input (unknown op; candidate
missing, not Python, without the launcher or failing to import) with a
one-line error on stderr.
"""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from patterns.core.records import EvidenceBundle
from patterns.validation.bundle import bundle_stem, markdown, verdict
from patterns.core.ops import OpError

FORMATS = ("table", "json", "markdown")
STYLE = {True: "[green]pass[/]", False: "[bold red]FAIL[/]", None: "[yellow]not run[/]"}


def validate_command(
    op: Annotated[str, typer.Argument(help="op under kernels/ (e.g. kda_decode), or a path to an op's spec.py")],
    candidate: Annotated[
        Path | None, typer.Argument(help="candidate file: a rewritten copy of the op's baseline.py (default: the baseline itself)")
    ] = None,
    out: Annotated[Path, typer.Option("--out", "-o", help="folder for the evidence bundle (JSON + Markdown)")] = Path("evidence"),
    device: Annotated[str, typer.Option(help="auto, cpu (Triton interpreter) or cuda")] = "auto",
    format: Annotated[str, typer.Option("--format", "-f", help="table, json or markdown")] = "table",
    pattern: Annotated[str | None, typer.Option("--pattern", help="the pattern the candidate applies: its max_cost sets the speed rule")] = None,
    timeout: Annotated[
        float | None, typer.Option("--timeout", min=1, help="seconds for the whole validation (default: the op's timeout_s); past it the candidate is rejected")
    ] = None,
    gate: Callable[..., EvidenceBundle] | None = None,
) -> None:
    """Compare a candidate with the op's baseline and reference; write an evidence bundle.

    `gate`: run_gate's stand-in where the gate runs elsewhere (`patterns validate --ray`: a Ray task)."""
    from patterns.core.library import LibraryError

    err = Console(stderr=True)
    if format not in FORMATS:
        _bad_input(err, f"unknown format '{format}' (table, json or markdown)")
    from patterns.core.files import FolderError, writable_folder

    created = not Path(out).exists()
    try:
        writable_folder(out, "the evidence bundle")  # before the gate runs: its result is never lost to --out
    except FolderError as e:
        _bad_input(err, f"--out: {e}")
    try:
        with err.status(f"validating {op}…") as status:
            bundle = (gate or run_gate)(op, candidate, out=out, device=device, pattern=pattern, timeout=timeout, on_stage=lambda s: status.update(f"validating {op}: {s}…"))
    except (OpError, LibraryError) as e:
        if created and Path(out).is_dir() and not any(Path(out).iterdir()):
            Path(out).rmdir()  # bad input leaves nothing behind, not even the folder made for the result
        _bad_input(err, str(e))
    console = Console()
    if format == "json":
        console.print_json(bundle.model_dump_json())
    elif format == "markdown":
        console.print(markdown(bundle), markup=False, highlight=False)
    else:
        console.print(checks_table(bundle))
        stem = out / bundle_stem(bundle)
        console.print(f"[bold]{escape(verdict(bundle))}[/]  evidence: {escape(str(stem))}.json, {escape(str(stem))}.md")
    raise typer.Exit(0 if bundle.passed else 1)


def run_gate(
    op: str,
    candidate: Path | None,
    *,
    out: Path | None,
    device: str = "auto",
    pattern: str | None = None,
    on_stage: Callable[[str], None] | None = None,
    timeout: float | None = None,
) -> EvidenceBundle:
    """The gate as every entry point runs it (this command, the MCP server): the candidate's pattern,
    if named, sets the speed rule through its max_cost. Raises LibraryError or OpError (GateInputError among them; one line)."""
    from patterns.core.library import get
    from patterns.validation.gate import validate

    max_cost = get(pattern).pattern.max_cost if pattern else 1.0
    return validate(op, candidate, device=device, out_dir=out, max_cost=max_cost, on_stage=on_stage, timeout=timeout)


def checks_table(bundle: EvidenceBundle) -> Table:
    """Every check that carries a number or did not pass; passing integrity checks are
    counted in one row (the Markdown and JSON bundles list each of them)."""
    table = Table(title=f"{bundle.op}: {Path(bundle.candidate).name} vs {Path(bundle.baseline).name}", expand=True)
    table.add_column("layer", no_wrap=True)
    table.add_column("check", no_wrap=True)
    table.add_column("shape", overflow="fold", max_width=24)
    table.add_column("result", no_wrap=True)
    table.add_column("reason", overflow="fold", ratio=1)  # the reason gets the width that is left
    quiet = [c for c in bundle.checks if c.layer == "integrity" and c.passed]
    for c in [*bundle.checks, None]:
        if quiet and (c is None or c.layer == "performance"):  # after the integrity rows
            table.add_row("integrity", f"{len(quiet)} more", "", STYLE[True], "static and runtime checks: listed in the bundle")
            quiet = []
        if c is None or (c.layer == "integrity" and c.passed):
            continue
        shape = " ".join(f"{k}={v}" for k, v in c.shape.items())
        table.add_row(c.layer, escape(c.name), escape(shape), STYLE[c.passed], escape(c.reason))
    return table


def _bad_input(err: Console, message: str) -> None:
    err.print(f"error: {message}", markup=False, highlight=False, soft_wrap=True)
    raise typer.Exit(2)


def main() -> None:  # pragma: no cover - `python -m patterns.validation.cli`
    typer.run(validate_command)


if __name__ == "__main__":  # pragma: no cover
    main()

