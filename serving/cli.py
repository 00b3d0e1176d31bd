"""`patterns serving ...`: the registry (status, history, promote, rollback), the engine, the end-to-end comparison and the prefill benchmark.

Torch, the model and the registry are imported inside the commands, so
registering them costs the `patterns` command nothing at start-up. Bad input is
one line on stderr and exit code 2 (the registry's RegistryError through
`patterns.cli.main`).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, NoReturn, Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

FORMATS = ("table", "json")
console = Console()


def _bad_input(message: str) -> NoReturn:
    Console(stderr=True).print(f"error: {message}", markup=False, highlight=False, soft_wrap=True)
    raise typer.Exit(2)


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


def engine_command(
    batch: Annotated[int, typer.Option("--batch", "-b", min=1, help="sequences generated together")] = 4,
    prompt_len: Annotated[int, typer.Option("--prompt-len", min=1, help="prompt tokens per sequence (seeded random ids)")] = 8,
    steps: Annotated[int, typer.Option("--steps", "-n", min=2, help="tokens generated per sequence")] = 16,
    impl: Annotated[str, typer.Option(help="auto (live on a GPU, reference on a CPU), reference (PyTorch) or live (the registry's Triton kernels)")] = "auto",
    device: Annotated[str, typer.Option(help="auto, cpu or cuda")] = "auto",
    model: Annotated[str, typer.Option(help="model preset: tiny (CPU, seconds), small (GPU-sized heads) or h200 (a served hybrid model on one H200)")] = "tiny",
    mode: Annotated[str, typer.Option(help="auto (graph on a GPU with live ops), eager (every op from Python), graph (a CUDA graph per batch-size bucket)")] = "auto",
    verify: Annotated[bool, typer.Option("--verify", help="shadow every live call with the reference and compare within the op's tolerance (eager)")] = False,
    seed: Annotated[int, typer.Option(help="seed of the prompts")] = 0,
    format: Annotated[str, typer.Option("--format", "-f", help="table or json")] = "table",
) -> None:
    """Batched greedy generation with the hybrid decoder: time to first token, inter-token latency, tokens/s."""
    if format not in FORMATS:
        _bad_input(f"unknown format '{format}' (table or json)")
    from patterns.serving.engine import Engine, EngineError
    from patterns.serving.model import PRESETS
    from patterns.serving.registry import RegistryError

    if model not in PRESETS:
        _bad_input(f"unknown model preset '{model}' ({', '.join(PRESETS)})")
    try:
        engine = Engine(PRESETS[model], impl=impl, device=device, verify=verify, mode=mode)  # type: ignore[arg-type]
        with Console(stderr=True).status(f"generating {batch} x {steps} tokens ({engine.impl} ops, {engine.mode}, on {engine.device})…"):
            report = engine.generate(engine.prompts(batch, prompt_len, seed), steps)
    except (EngineError, RegistryError) as e:
        _bad_input(str(e))
    console = Console()
    if format == "json":
        console.print_json(report.model_dump_json())
    else:
        console.print(engine_tables(report))
    failed = [op.op for op in report.ops if op.within_tolerance is False]
    raise typer.Exit(1 if failed else 0)


def engine_tables(report) -> Table:
    steps = "CUDA graph" if report.mode == "graph" and report.device.startswith("cuda") else report.mode
    bucket = f" (bucket {report.bucket})" if report.bucket != report.batch else ""
    metrics = Table(title=f"engine: {report.impl} ops, {steps}, on {report.device}, batch {report.batch}{bucket}, prompt {report.prompt_len}, {report.new_tokens} new tokens", title_justify="left")
    for col in ("time to first token", "inter-token latency p50", "p99", "tokens/s"):
        metrics.add_column(col, justify="right")
    metrics.add_row(f"{report.ttft_ms:.1f} ms", f"{report.itl_ms_median:.2f} ms", f"{report.itl_ms_p99:.2f} ms", f"{report.tokens_per_s:.1f}")
    verified = any(op.within_tolerance is not None for op in report.ops)
    ops = Table(title="what ran (the registry's live versions, or the PyTorch references)", title_justify="left")
    for col in ("op", "version", "pattern", "sha256", "calls", *(("max |live - ref|", "in tolerance") if verified else ())):
        ops.add_column(col, no_wrap=True)
    for op in report.ops:
        live = op.impl == "live"
        row = [escape(op.op), f"v{op.version}" if live else "reference", escape(op.pattern or "baseline") if live else "-", op.sha256[:8] or "-", str(op.calls)]
        if verified:
            err = f"{op.max_abs_err:.2e}" if op.max_abs_err is not None else "-"
            row += [err, {True: "[green]yes[/]", False: "[bold red]no[/]", None: "-"}[op.within_tolerance]]
        ops.add_row(*row)
    mismatches = [f"{op.op} v{op.version}: {op.mismatch}" for op in report.ops if op.mismatch]
    if mismatches:
        ops.caption, ops.caption_justify = escape("\n".join(mismatches)), "left"
    grid = Table.grid()
    grid.add_row(metrics)
    grid.add_row(ops)
    return grid


def _ints(option: str, text: str) -> list[int]:
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        _bad_input(f"{option}: '{text}' is not a comma-separated list of integers")
    if not values or min(values) < 1:
        _bad_input(f"{option}: '{text}' needs at least one value, each at least 1")
    return values


def compare_command(
    against: Annotated[str, typer.Option(help="the baseline arm: v1 (every op at version 1, kernels/<op>/baseline.py) or OP=VERSION[,OP=VERSION] (the others live)")] = "v1",
    model: Annotated[str, typer.Option(help="model preset (tiny, small, h200)")] = "tiny",
    batch: Annotated[Optional[str], typer.Option(help="batch sizes, comma-separated (default: the preset's)")] = None,
    context: Annotated[Optional[str], typer.Option(help="context lengths, comma-separated (default: the preset's)")] = None,
    steps: Annotated[int, typer.Option(min=2, help="decode steps per round")] = 16,
    rounds: Annotated[int, typer.Option(min=2, help="interleaved rounds per shape (AB, BA, ...)")] = 8,
    ttft_runs: Annotated[int, typer.Option(min=1, help="timed prefills per arm and context")] = 3,
    profile_steps: Annotated[int, typer.Option(min=1, help="steps profiled per arm and shape")] = 4,
    mode: Annotated[str, typer.Option(help="auto (graph on a GPU), eager or graph")] = "auto",
    device: Annotated[str, typer.Option(help="auto, cpu or cuda")] = "auto",
    checks: Annotated[bool, typer.Option("--checks/--no-checks", help="first verify every live op against its reference and the graph's tokens against eager ones")] = False,
    budget_s: Annotated[Optional[float], typer.Option(help="start no new context or shape after this many seconds")] = None,
    trace: Annotated[Optional[Path], typer.Option(help="folder for the best shape's profiler traces (Chrome trace JSON, Perfetto)")] = None,
    out: Annotated[Optional[Path], typer.Option(help="write the comparison JSON here, after every shape (atomically)")] = None,
    format: Annotated[str, typer.Option("--format", "-f", help="table or json")] = "table",
) -> None:
    """End to end, the registry's live ops against a baseline, interleaved in one process: tokens/s, ITL, TTFT, time per op."""
    import time

    if format not in FORMATS:
        _bad_input(f"unknown format '{format}' (table or json)")
    start = time.monotonic()
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from patterns.core.files import write_atomic
    from patterns.serving import compare as cmp
    from patterns.serving.engine import EngineError, bind_ops, resolve, resolve_mode
    from patterns.serving.model import PRESETS, HybridModel
    from patterns.serving.registry import Registry, RegistryError

    if model not in PRESETS:
        _bad_input(f"unknown model preset '{model}' ({', '.join(PRESETS)})")
    cfg = PRESETS[model]
    default_batches, default_contexts = cmp.DEFAULT_SHAPES[model]
    batches = _ints("--batch", batch) if batch else list(default_batches)
    contexts = _ints("--context", context) if context else list(default_contexts)
    if max(contexts) + steps + 1 > cfg.max_len:
        _bad_input(f"--context {max(contexts)} + {steps} steps exceed the {model} preset's max_len {cfg.max_len}")
    try:
        pins = cmp.against_versions(against)
        _, device = resolve("live", device)  # type: ignore[arg-type]
        steps_mode = resolve_mode(mode, "live", device, verify=False)  # type: ignore[arg-type]
        registry = Registry()
        baseline = cmp.Arm(against, bind_ops("live", registry, versions=pins))
        candidate = cmp.Arm("live", bind_ops("live", registry))
    except (EngineError, RegistryError) as e:
        _bad_input(str(e))
    shapes = [(b, c) for c in contexts for b in batches]
    err = Console(stderr=True)

    def save(result) -> None:
        if out is not None:
            write_atomic(out, (result.model_dump_json(indent=1) + "\n").encode())

    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=err, transient=True) as progress:
        task = progress.add_task(f"{against} vs live, {steps_mode}, on {device}: shapes", total=len(shapes))
        the_model = HybridModel(cfg, device)
        found = {}
        if checks:
            progress.update(task, description="checks: verify, graph vs eager")
            for name, check in (("verify", cmp.check_verify), ("graph_vs_eager", cmp.check_graph_vs_eager)):
                b, p, n = cmp.CHECK_SIZES[model][name]
                try:
                    found[name] = check(cfg, device, registry, the_model, batch=b, prompt_len=p, new_tokens=n)
                except Exception as exc:  # noqa: BLE001 - a failed check is recorded, the comparison still runs
                    found[name] = {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"}
            progress.update(task, description=f"{against} vs live, {steps_mode}, on {device}: shapes")

        def update(result) -> None:
            result.checks = found
            progress.update(task, completed=len(result.shapes))
            save(result)

        result = cmp.compare(cfg, device, baseline, candidate, shapes, mode=steps_mode, steps=steps, rounds=rounds, ttft_runs=ttft_runs,
                             profile_n=profile_steps, trace_dir=trace, deadline=start + budget_s if budget_s else None, model=the_model, on_update=update)
    result.checks = found
    save(result)
    console = Console()
    if format == "json":
        console.print_json(result.model_dump_json())
    else:
        console.print(compare_tables(result))
    failed = found.get("verify", {}).get("passed") is False or found.get("graph_vs_eager", {}).get("same_tokens") is False
    raise typer.Exit(1 if failed else 0)


def compare_tables(result) -> Table:
    from patterns.serving import report

    def table(title: str, rows) -> Table:
        head, body = rows
        t = Table(title=title, title_justify="left")
        for i, col in enumerate(head):
            t.add_column(escape(col), justify="left" if i == 0 and col == "op" else "right")
        for row in body:
            t.add_row(*(escape(x) for x in row))
        return t

    claim = "" if result.device.startswith("cuda") else " (CPU: not a speed claim)"
    grid = Table.grid()
    grid.add_row(table(f"decode, {result.baseline} vs {result.candidate}, {result.mode}, on {result.device}{claim}", report.throughput_rows(result)))
    grid.add_row(table("inter-token latency", report.latency_rows(result)))
    grid.add_row(table("time to first token (one request)", report.ttft_rows(result)))
    best = result.best()
    if best is not None:
        grid.add_row(table(f"a step at the best shape (batch {best.batch}, context {best.context}), ms; * changed", report.breakdown_rows(result, best)))
        grid.add_row(escape(report.explain(result, best)))
    return grid


def prefill_command(
    impl: Annotated[Optional[list[Path]], typer.Option("--impl", help="prefill file to measure (repeatable; default: the package's serving/prefill.py)")] = None,
    rounds: Annotated[int, typer.Option(min=1, help="interleaved rounds of prefill alone vs prefill + transfer")] = 15,
    device: Annotated[str, typer.Option(help="auto, cpu or cuda: where the layers and the KV pool live")] = "auto",
    trace: Annotated[Optional[Path], typer.Option(help="write the last round's thread timelines as Chrome trace JSON (Perfetto)")] = None,
    format: Annotated[str, typer.Option("--format", "-f", help="table or json")] = "table",
) -> None:
    """Prefill with KV-cache transfer: the gap to prefill alone, against the 5% rule (exit 1 when it fails)."""
    if format not in FORMATS:
        _bad_input(f"unknown format '{format}' (table or json)")
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from patterns.core.ops import OpError
    from patterns.serving.native import NativeBuildError
    from patterns.serving.overlap import load_prefill, measure, to_check
    from patterns.serving.trace import write_trace

    if trace is not None and trace.is_dir():
        _bad_input(f"--trace: {trace} is a folder (the trace is one JSON file)")
    files = impl or [Path(__file__).with_name("prefill.py")]
    checks, timelines = [], {}
    try:
        for path in files:  # bad input is reported before anything runs
            load_prefill(path)
        with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=Console(stderr=True), transient=True) as progress:
            for path in files:
                task = progress.add_task(f"{path.name}: rounds", total=rounds)
                m = measure(path, rounds, device, on_round=lambda _: progress.advance(task))
                checks.append(to_check(m))
                timelines.update({f"{path}: {label}": t for label, t in m.timelines.items()})
    except (OpError, NativeBuildError) as e:
        _bad_input(str(e))
    if trace is not None:
        write_trace(trace, timelines)
    console = Console()
    if format == "json":
        console.print_json(json.dumps([c.model_dump() for c in checks]))
    else:
        console.print(prefill_table(checks))
        if trace is not None:
            console.print(f"trace: {escape(str(trace))} (open in https://ui.perfetto.dev)")
    raise typer.Exit(0 if all(c.passed for c in checks) else 1)


def prefill_table(checks) -> Table:
    first = checks[0].details
    load = first.get("load_average_1min")
    table = Table(title=f"prefill + KV transfer vs prefill alone ({first['device']}, {first['rounds']} rounds" + (f", load {load:.1f}" if load is not None else "") + ")", title_justify="left")
    for col in ("implementation", "alone", "+transfer", "gap", "gap 95% CI", "waits overlap", "≤5%"):
        table.add_column(col, justify="left" if col == "implementation" else "right", overflow="fold", no_wrap=col != "implementation")
    for c in checks:
        d = c.details
        lo, hi = d["gap_ci95"]
        verdict = "[green]pass[/]" if c.passed else "[bold red]FAIL[/]"
        table.add_row(
            escape(d["impl"]), f"{d['alone_ms_median']:.1f} ms", f"{d['with_transfer_ms_median']:.1f} ms", f"{100 * d['gap_median']:+.1f}%",
            f"{100 * lo:+.1f}..{100 * hi:+.1f}%", f"{100 * d['native_overlap_median']:.0f}%", verdict,
        )
    failed = [f"{Path(c.details['impl']).name}: {c.reason}" for c in checks if not c.passed]
    if failed:
        table.caption = escape("\n".join(failed))
        table.caption_justify = "left"
    return table


serving_app.command("engine")(engine_command)
serving_app.command("compare")(compare_command)
serving_app.command("prefill")(prefill_command)
