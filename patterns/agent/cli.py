"""`patterns agent ...` and `patterns review ...` (`patterns serving ...` is patterns.serving.cli).

Heavy modules (torch, the gate, the retriever) are imported inside the
commands, so registering these sub-apps costs `patterns` nothing at start-up.
Errors are raised as AgentError / ReviewError, which `patterns.cli.main`
prints as one line with exit code 2.
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from typer.core import TyperGroup
from rich.markup import escape
from rich.table import Table

console = Console()
err_console = Console(stderr=True)

# --------------------------------------------------------------------------------------
# the agent
# --------------------------------------------------------------------------------------


def agent_command(
    targets: list[str] = typer.Argument(..., metavar="TARGET", help="ops (kda_decode), spec.py files (patterns spec init) or folders with one, kernels/<op> folders or kernel files; several run in turn, or side by side with --ray"),
    op: Optional[str] = typer.Option(None, "--op", help="the op TARGET implements (a name or a spec.py), when its path does not say"),
    max_steps: int = typer.Option(8, "--max-steps", min=1, help="attempts (rewrite + gate) at most, per target"),
    review: str = typer.Option("queue", "--review", help="queue (leave items for `patterns review`) or interactive (ask here)"),
    auto_merge_exact: bool = typer.Option(False, "--auto-merge-exact", help="merge exact (bit-identical) codemod rewrites that pass the gate without asking"),
    device: str = typer.Option("auto", "--device", help="auto, cpu (Triton interpreter: correctness and integrity) or cuda (also speed)"),
    arch: str = typer.Option("h200", "--arch", help="the GPU to plan for (h200, h100, a100, b200, mi300x): estimates, applicability, rewrite parameter defaults"),
    shapes: Optional[int] = typer.Option(None, "--shapes", help="check correctness on the first N shapes of the op's grid only (recorded in the review item)"),
    profile: Optional[Path] = typer.Option(None, "--profile", help="ncu CSV, torch.profiler trace or evidence bundle to use instead of the estimate"),
    fresh: bool = typer.Option(False, "--fresh", help="start a new run even if an unfinished run of this target exists"),
    chroma_url: Optional[str] = typer.Option(None, "--chroma-url", help="retrieve from a ChromaDB server's index (`patterns index --chroma-url`), one for every host"),
    ray: Optional[str] = typer.Option(None, "--ray", metavar="[ADDRESS]", help="validate as Ray tasks on the cluster at ADDRESS (host:port, ray://host:port, auto); alone: a Ray instance started on this host"),
    ray_resource: Optional[str] = typer.Option(None, "--ray-resource", metavar="NAME=N", help="with --ray: each task asks for N units of this custom resource instead of one GPU (CPU-only clusters)"),
) -> None:
    """Analyse each TARGET, try the patterns that fit, validate each candidate and queue the ones that pass for review."""
    from patterns.agent.loop import Agent, AgentConfig, AgentError, prepare_device, resolve_target

    if review not in ("queue", "interactive"):
        raise AgentError(f"--review: '{review}' is not queue or interactive")
    if op is not None and len(targets) > 1:
        raise AgentError("--op: only with one TARGET")
    if ray_resource is not None and ray is None:
        raise AgentError("--ray-resource: only with --ray")
    gate_device = None
    if ray is not None:
        from patterns.agent.fanout import cluster_device, connect, parse_resource

        resource = parse_resource(ray_resource)
        connect(ray)
        gate_device = cluster_device(device, resource)
        if gate_device == "cpu":
            prepare_device("cpu")
    else:
        prepare_device(device)
    resolved = [resolve_target(t, op) for t in targets]
    seen: dict[Path, str] = {}
    for t, (_, path) in zip(targets, resolved):
        if path in seen:
            raise AgentError(f"{t}: the same target as {seen[path]}")
        seen[path] = t
    cfgs = [AgentConfig(op=op_name, target=path, max_steps=max_steps, review=review, auto_merge_exact=auto_merge_exact, device=device,
                        arch=arch, shapes=shapes, profile=profile, fresh=fresh, chroma_url=chroma_url) for op_name, path in resolved]
    agents = [Agent(cfg, gate_device=gate_device) for cfg in cfgs]
    with _progress() as progress:
        def say(line: str) -> None:
            progress.console.print(escape(line), highlight=False, soft_wrap=True)

        def ask(item) -> str:
            progress.stop()
            try:
                return _ask(item)
            finally:
                progress.start()

        for agent in agents:
            # a user's op: its spec's name, not the path
            name = agent.name if len(agents) == 1 else f"{agent.name} ({agent.cfg.target.name})"
            task = progress.add_task(f"{name}: starting", total=None)
            agent.ask = ask
            agent.say = (lambda line: say(line)) if len(agents) == 1 else (lambda line, name=name: say(f"{name}: {line}"))
            agent.stage = lambda s, task=task, name=name: progress.update(task, description=escape(f"{name}: {s}"))
            agent.advance = lambda done, total, task=task: progress.update(task, completed=done, total=total)
        if ray is None:
            results = [agent.run() for agent in agents]
        else:
            from patterns.agent.fanout import Fanout

            bar = progress.add_task("Ray tasks", total=None)
            results = Fanout(agents, resource, say=say, progress=lambda done, total: progress.update(bar, completed=done, total=total)).run()
    for agent, result in zip(agents, results):
        console.print(_trail_table(f"{agent.name}: run {result.run}" + (" (resumed)" if result.resumed else ""), result.attempts))
        for item in result.reviews:
            console.print(f"review item [bold]{item.id}[/]: {escape(item.pattern_id)} ({item.safety.value}) — {item.status}; `patterns review show {item.id}`")
        console.print(f"[dim]{escape(result.finish)}[/]")


class _RunByDefault(TyperGroup):
    """`patterns agent TARGET...` runs the agent (the `run` command); `patterns agent status` lists its
    runs. A target that is literally named `status` is given as `./status` or `patterns agent run status`."""

    def resolve_command(self, ctx, args):
        if args and args[0] not in self.commands:
            args = ["run", *args]
        return super().resolve_command(ctx, args)


agent_app = typer.Typer(
    name="agent", cls=_RunByDefault, no_args_is_help=True, context_settings={"ignore_unknown_options": True},
    help="Run the agent on targets (`patterns agent TARGET...`, i.e. `agent run`), or list its runs (`agent status`).",
)
agent_app.command("run")(agent_command)


@agent_app.command("status")
def agent_status(
    op: Optional[str] = typer.Option(None, "--op", help="only runs of this op"),
    format: str = typer.Option("table", "--format", help="table or json"),
) -> None:
    """The agent's runs, oldest first: finished, running, or interrupted (the next run of the same target resumes it)."""
    import json

    from patterns.api import UsageError, agent_runs

    if format not in ("table", "json"):
        raise UsageError(f"--format: '{format}' is not table or json")
    rows = agent_runs(op, say=_say)
    if format == "json":
        print(json.dumps(rows, indent=2))
        return
    table = Table(title=f"{len(rows)} agent runs", title_justify="left")
    for col in ("run", "state", "attempts", "reviews", "finish"):
        table.add_column(col, overflow="fold", no_wrap=col == "run")
    for r in rows:
        tried = ", ".join(f"{n} {k}" for k, n in sorted(r["outcomes"].items()))
        table.add_row(r["run"], r["state"], f"{r['attempts']}" + (f" ({tried})" if tried else ""), str(len(r["reviews"])),
                      escape(r["finish"] or ""))
    console.print(table)


def _progress():
    """A live spinner for a person at a terminal; piped output gets the step lines only."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    return Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=err_console,
                    transient=True, disable=not err_console.is_terminal)


def _ask(item) -> str:
    from rich.prompt import Prompt

    print_diff(item.diff)
    console.print(f"[bold]{escape(item.hypothesis.text)}[/]\n{escape(item.safety.review)}")
    return Prompt.ask(f"{item.id}: accept, reject, or later (leave it queued)", choices=["accept", "reject", "later"], default="later", console=console)


def _trail_table(title: str, attempts) -> Table:
    style = {"passed": "green", "failed": "red", "refused": "yellow", "already-applied": "dim", "invalid": "red"}
    table = Table(title=title, title_justify="left", expand=True)
    table.add_column("#", no_wrap=True)
    table.add_column("pattern", ratio=2, overflow="fold")
    table.add_column("outcome", no_wrap=True)
    table.add_column("layer: reason", ratio=4, overflow="fold")
    table.add_column("next", no_wrap=True)
    for a in attempts:
        params = ", ".join(f"{k}={v}" for k, v in a.params.items())
        name = a.pattern_id + (f"\n[dim]{escape(params)}[/]" if params else "") + ("\n[dim]on an earlier candidate[/]" if a.base != "target" else "")
        table.add_row(str(a.step), name, f"[{style.get(a.outcome, '')}]{a.outcome}[/]", escape(f"{a.layer}: {a.reason}" if a.layer else a.reason), a.action)
    return table


# --------------------------------------------------------------------------------------
# review
# --------------------------------------------------------------------------------------

review_app = typer.Typer(name="review", help="Review the agent's validated candidates: list, show, accept (merge) or reject.", no_args_is_help=True)


def _say(line: str) -> None:
    err_console.print(line, highlight=False, markup=False, soft_wrap=True)  # a path is never broken across lines


def _store():
    from patterns.api import review_store

    return review_store(_say)


@review_app.command("list")
def review_list(
    status: str = typer.Option("pending", "--status", help="pending, accepted, rejected or all"),
    op: Optional[str] = typer.Option(None, "--op", help="only this op (a name, or a spec.py or its folder)"),
    format: str = typer.Option("table", "--format", help="table or json"),
) -> None:
    """Review items, newest last."""
    import json

    from patterns.api import UsageError, review_items
    from patterns.core.records import ReviewItem

    if format not in ("table", "json"):
        raise UsageError(f"--format: '{format}' is not table or json")
    rows = review_items(status, op, say=_say)
    if format == "json":
        print(json.dumps(rows, indent=2))
        return
    items = [ReviewItem.model_validate(r) for r in rows]
    table = Table(title=f"{len(items)} review items ({status})", title_justify="left")
    for col in ("id", "op", "pattern", "safety", "status", "gate", "created"):
        table.add_column(col, overflow="fold", no_wrap=col == "id")
    for i in items:
        table.add_row(i.id, i.op, escape(i.pattern_id) + (" [dim](model's patch)[/]" if i.origin == "llm-patch" else ""), i.safety.value,
                      i.status + (f" [dim]by {escape(i.decided_by)}[/]" if i.decided_by else ""), escape(f"{i.device}, {i.grid}"), i.created[:16].replace("T", " "))
    console.print(table)


@review_app.command("show")
def review_show(
    item_id: str = typer.Argument(..., metavar="ID"),
    diff: bool = typer.Option(True, "--diff/--no-diff", help="show the diff"),
    format: str = typer.Option("table", "--format", help="table or json (the item, its bundle's verdict and checks)"),
) -> None:
    """One item: hypothesis, the feedback trail, the gate's checks and the diff."""
    if format not in ("table", "json"):
        from patterns.api import UsageError

        raise UsageError(f"--format: '{format}' is not table or json")
    if format == "json":
        import json

        from patterns.api import review_item

        print(json.dumps(review_item(item_id, say=_say), indent=2))
        return
    from rich.panel import Panel

    from patterns.validation.bundle import read_bundle
    from patterns.validation.cli import checks_table

    item = _store().get(item_id)
    head = (f"[bold]{escape(item.pattern_id)}[/] on [bold]{escape(item.op)}[/] · {item.safety.value} · {item.status}"
            + (f" by {escape(item.decided_by)} at {escape(item.decided_at)}" if item.decided_by else "")
            + f"\n[dim]target {escape(item.target)}\ncandidate {escape(item.candidate)}\nevidence {escape(item.bundle)}\n{escape(item.device)}, {escape(item.grid)} · {escape(item.safety.review)}[/]")
    console.print(Panel(head, title=item.id, expand=False))
    console.print(f"[bold]hypothesis[/] ({item.hypothesis.source}): {escape(item.hypothesis.text)}")
    console.print(f"[bold]prediction[/]: {escape(item.hypothesis.prediction)}")
    console.print(_trail_table("feedback trail", item.trail))
    if item.end_to_end is not None:
        console.print(_end_to_end_line(item.end_to_end))
    try:
        console.print(checks_table(read_bundle(Path(item.bundle))))
    except (OSError, ValueError) as exc:
        console.print(f"[red]evidence bundle unreadable:[/] {escape(str(exc).splitlines()[0])}")
    if diff:
        print_diff(item.diff)


def print_diff(diff: str) -> None:
    """The diff exactly as `git apply` reads it: never wrapped, no escape codes in a pipe
    (`patterns review show ID | git apply` skips the report above it); coloured per line on a terminal."""
    import sys

    console.file.flush()
    if not console.is_terminal:
        sys.stdout.write(diff if diff.endswith("\n") else diff + "\n")
        return
    for line in diff.splitlines():
        style = "green" if line.startswith("+") else "red" if line.startswith("-") else "cyan" if line.startswith("@@") else ""
        console.print(line, style=style or None, markup=False, highlight=False, soft_wrap=True)


def _who(by: Optional[str]) -> str:
    import getpass

    return by or getpass.getuser()


@review_app.command("accept")
def review_accept(
    item_id: str = typer.Argument(..., metavar="ID"),
    by: Optional[str] = typer.Option(None, "--by", help="who accepts (default: the current user)"),
    note: str = typer.Option("", "--note", help="a note kept with the item"),
    end_to_end: bool = typer.Option(True, "--end-to-end/--no-end-to-end", help="on a GPU, then run the engine with the previous and the new version (patterns serving compare)"),
) -> None:
    """Merge the candidate into its target, make it live in the serving registry and record the measurement."""
    store = _store()
    item, m = store.accept(item_id, by=_who(by), note=note)
    from patterns.core.user_evidence import describe

    live = f"; {item.op} v{item.registry_version} is live" if item.registry_version is not None else ""
    console.print(f"accepted {item.id}: merged into {escape(item.target)}{live}", highlight=False, soft_wrap=True)
    if m is not None:
        where = "the library's pattern.yaml" if store.in_library(item) else "your evidence store"
        console.print(f"{escape(item.pattern_id)} evidence ({where}): {escape(describe(m))} ({escape(m.shapes)})", highlight=False, soft_wrap=True)
    else:
        console.print("no measurement recorded: the bundle has no speed ratio and no error ratio that can be formed", highlight=False)
    if end_to_end and item.registry_version is not None:
        _judge_end_to_end(store, item)


def _judge_end_to_end(store, item) -> None:
    """The engine with the previous and the new version (patterns.agent.endtoend); a failure leaves the accept standing."""
    import torch

    from patterns.agent.endtoend import EndToEndError, judge, kernel_ratio, run_comparison
    from patterns.core.records import ServingComparison
    from patterns.validation.bundle import read_bundle

    bundle = read_bundle(Path(item.bundle))
    if kernel_ratio(bundle) is None or not torch.cuda.is_available():
        console.print("end to end: not measured (it needs a GPU bundle and a GPU)", highlight=False)
        return
    out = Path(item.bundle).parent / f"{item.id}-end-to-end" / "comparison.json"  # beside the gate's bundle
    try:
        with err_console.status(f"end to end: the engine with {item.op}'s previous and new versions…"):
            path = run_comparison(item, store.registry, out)
        e2e = judge(item, bundle, ServingComparison.model_validate_json(path.read_bytes()), path)
    except EndToEndError as exc:
        err_console.print(f"end to end: not recorded: {exc}", markup=False, highlight=False, soft_wrap=True)
        return
    store.record_end_to_end(item.id, e2e)
    console.print(_end_to_end_line(e2e), highlight=False)


def _end_to_end_line(e2e) -> str:
    kernel = f"kernel {e2e.kernel_ratio:.3g}x, " if e2e.kernel_ratio is not None else ""
    line = (f"end to end: {kernel}tokens/s {e2e.ratio:.3f}x [{e2e.ci95[0]:.3f}, {e2e.ci95[1]:.3f}] at batch {e2e.shape['batch']}, "
            f"context {e2e.shape['context']} ({e2e.verdict}; v{e2e.previous_version} -> v{e2e.new_version} on {escape(e2e.hardware)})")
    return line + (f"\n[bold red]flagged:[/] {escape(e2e.flag)}" if e2e.flag else "")


@review_app.command("reject")
def review_reject(
    item_id: str = typer.Argument(..., metavar="ID"),
    by: Optional[str] = typer.Option(None, "--by", help="who rejects (default: the current user)"),
    note: str = typer.Option("", "--note", help="why"),
) -> None:
    """Reject the candidate: nothing else changes."""
    item = _store().reject(item_id, by=_who(by), note=note)
    console.print(f"rejected {item.id}")
