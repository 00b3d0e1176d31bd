"""`patterns serving ...`, `patterns agent ...` and `patterns review ...`.

Heavy modules (torch, the gate, the retriever) are imported inside the
commands, so registering these sub-apps costs `patterns` nothing at start-up.
Errors are raised as RegistryError / AgentError, which `patterns.cli.main`
prints as one line with exit code 2.
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

console = Console()
err_console = Console(stderr=True)

serving_app = typer.Typer(name="serving", help="The serving registry: which implementation of each op is live.", no_args_is_help=True)


def _impl_table(title: str, rows, live: dict[str, int] | None = None) -> Table:
    table = Table(title=title, title_justify="left")
    for col in ("op", "version", "pattern", "sha256", "accepted", "evidence"):
        table.add_column(col, overflow="fold", no_wrap=col in ("op", "version", "sha256"))
    for impl in rows:
        mark = " [bold green]live[/]" if live is not None and live.get(impl.op) == impl.version else ""
        table.add_row(
            escape(impl.op), f"v{impl.version}{mark}", escape(impl.pattern or "baseline"), impl.sha256[:12],
            escape(f"{impl.accepted_by}, {impl.accepted_at[:16].replace('T', ' ')}"), escape(Path(impl.bundle).name if impl.bundle else "-"),
        )
    return table


@serving_app.command("status")
def serving_status() -> None:
    """The live version of every op."""
    from patterns.serving.registry import Registry

    reg = Registry()
    console.print(_impl_table(f"live ops ({reg.root})", reg.status().values()))


@serving_app.command("history")
def serving_history(op: str = typer.Argument(..., help="op under kernels/, e.g. kda_decode")) -> None:
    """Every registered version of OP, the live one marked."""
    from patterns.serving.registry import Registry

    reg = Registry()
    versions = reg.history(op)
    console.print(_impl_table(f"{op}: versions (made live in turn: {', '.join(map(str, reg.trail(op)))})", versions, {op: reg.live(op).version}))


@serving_app.command("promote")
def serving_promote(
    op: str = typer.Argument(..., help="op under kernels/"),
    version: int = typer.Argument(..., help="registered version to make live"),
) -> None:
    """Make VERSION of OP live."""
    from patterns.serving.registry import Registry

    impl = Registry().promote(op, version)
    console.print(f"{escape(op)}: v{impl.version} is live ({escape(impl.pattern or 'baseline')}, sha256 {impl.sha256[:12]})")


@serving_app.command("rollback")
def serving_rollback(op: str = typer.Argument(..., help="op under kernels/")) -> None:
    """Make the version of OP that was live before the current one live again."""
    from patterns.serving.registry import Registry

    impl = Registry().rollback(op)
    console.print(f"{escape(op)}: rolled back, v{impl.version} is live ({escape(impl.pattern or 'baseline')}, sha256 {impl.sha256[:12]})")


# the engine and the prefill/KV-transfer benchmark live with the serving stack (torch is imported inside)
from patterns.serving.cli import engine_command, prefill_command  # noqa: E402

serving_app.command("engine")(engine_command)
serving_app.command("prefill")(prefill_command)
