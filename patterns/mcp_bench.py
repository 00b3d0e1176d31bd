"""Benchmark of `patterns mcp`: endurance, concurrency, memory and suggest latency through the server.

    python -m patterns.mcp_bench [--out evidence/mcp/bench.json]

Starts the server as a user would (`patterns mcp --http 127.0.0.1:PORT`, and
`patterns mcp` on stdio for the latency), talks to it with the MCP SDK's client,
and reports:

- 200 sequential tool calls in one session (list, show, search, suggest, apply
  as a diff, review_list in turn), then 8 clients at once, each in its own
  session making 25 calls, then the 200 sequential calls again: errors counted,
  each tool's median time, the server's RSS at start, after the warm-up (which
  builds the index) and after each phase (memory is stable when the last
  phases add nothing);
- `suggest` on the bundled KDA decode kernel on a warm server: median and p95
  over 50 calls, over HTTP and over stdio.

The server gets caches of its own (XDG_CACHE_HOME in a temporary folder), so
the warm-up builds the index once and no other process's library invalidates
it. Times are wall-clock on whatever machine runs it; the target is a median
under 0.3 s. Nothing here is a test: the numbers go to stdout and to --out.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from patterns.core.ops import kernels_dir

SHAPES = {"B": 8, "T": 1, "H": 32, "HV": 32, "K": 128, "V": 128}
SEQUENTIAL = 200
CLIENTS, PER_CLIENT = 8, 25
LATENCY_CALLS = 50


def _calls(kernel: str) -> list[tuple[str, dict]]:
    return [
        ("list", {"bottleneck": "memory-bound"}),
        ("show", {"id": "split_underfilled_grid"}),
        ("search", {"text": "decode under-fills the GPU", "top": 5}),
        ("suggest", {"path": kernel, "shapes": SHAPES, "dtypes": {"state": "fp32"}}),
        ("apply", {"pattern_id": "cache_eviction_hints", "path": kernel}),
        ("review_list", {"status": "all"}),
    ]


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def _run_calls(url_or_params, calls: list[tuple[str, dict]], advance, times: dict[str, list[float]] | None = None) -> list[str]:
    from mcp import Client

    errors = []
    async with Client(url_or_params, read_timeout_seconds=300) as client:
        for name, args in calls:
            t0 = time.perf_counter()
            result = await client.call_tool(name, args)
            if times is not None:
                times.setdefault(name, []).append(time.perf_counter() - t0)
            if result.is_error:
                errors.append(f"{name}: {result.content[0].text}")
            advance()
    return errors


async def _latency(url_or_params, kernel: str) -> list[float]:
    from mcp import Client

    times = []
    async with Client(url_or_params, read_timeout_seconds=300) as client:
        args = {"path": kernel, "shapes": SHAPES, "dtypes": {"state": "fp32"}}
        first = await client.call_tool("suggest", args)  # warm: library, index, facts
        if first.is_error:
            raise RuntimeError(first.content[0].text)
        for _ in range(LATENCY_CALLS):
            t0 = time.perf_counter()
            result = await client.call_tool("suggest", args)
            times.append(time.perf_counter() - t0)
            if result.is_error:
                raise RuntimeError(result.content[0].text)
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="write the results as JSON here")
    args = parser.parse_args(argv)
    console = Console()
    from mcp import StdioServerParameters

    root = Path(tempfile.mkdtemp(prefix="patterns-mcp-bench-"))
    kernel = root / "kda_decode.py"
    shutil.copy(kernels_dir() / "kda_decode" / "baseline.py", kernel)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PATTERNS_AGENT_HOME": str(root / "agent"), "XDG_CACHE_HOME": str(root / "cache")}
    port = _free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    server = subprocess.Popen([sys.executable, "-m", "patterns.cli", "mcp", "--http", f"127.0.0.1:{port}", "--root", str(root)],
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    results: dict = {"machine": f"{os.cpu_count()} CPUs", "python": sys.version.split()[0]}
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"the server did not start (exit code {server.poll()})")
                time.sleep(0.2)
        results["rss_mib_start"] = rss_mib(server.pid)
        calls = _calls(str(kernel))
        with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=console, transient=True) as progress:
            warm = progress.add_task("warm-up", total=len(calls))
            results["warm_up_errors"] = anyio.run(_run_calls, url, calls, lambda: progress.advance(warm))
            results["rss_mib_warm"] = rss_mib(server.pid)

            def sequential(key: str) -> None:
                task = progress.add_task(f"{SEQUENTIAL} sequential calls", total=SEQUENTIAL)
                times: dict[str, list[float]] = {}
                t0 = time.perf_counter()
                errors = anyio.run(_run_calls, url, [calls[i % len(calls)] for i in range(SEQUENTIAL)], lambda: progress.advance(task), times)
                results[key] = {"calls": SEQUENTIAL, "errors": len(errors), "seconds": time.perf_counter() - t0, "first_errors": errors[:3],
                                "median_s_by_tool": {name: statistics.median(v) for name, v in times.items()}}
                results[f"rss_mib_after_{key}"] = rss_mib(server.pid)

            sequential("sequential")

            conc = progress.add_task(f"{CLIENTS} concurrent clients", total=CLIENTS * PER_CLIENT)

            async def concurrent() -> list[str]:
                found: list[str] = []

                async def one(k: int) -> None:
                    mine = [calls[(k + i) % len(calls)] for i in range(PER_CLIENT)]
                    found.extend(await _run_calls(url, mine, lambda: progress.advance(conc)))

                async with anyio.create_task_group() as tg:
                    for k in range(CLIENTS):
                        tg.start_soon(one, k)
                return found

            t0 = time.perf_counter()
            errors = anyio.run(concurrent)
            results["concurrent"] = {"clients": CLIENTS, "calls": CLIENTS * PER_CLIENT, "errors": len(errors),
                                     "seconds": time.perf_counter() - t0, "first_errors": errors[:3]}
            results["rss_mib_after_concurrent"] = rss_mib(server.pid)
            sequential("sequential_again")

            progress.add_task("suggest latency over HTTP", total=None)
            http_times = anyio.run(_latency, url, str(kernel))
            results["rss_mib_after_latency"] = rss_mib(server.pid)
            progress.add_task("suggest latency over stdio", total=None)
            stdio = StdioServerParameters(command=sys.executable, args=["-m", "patterns.cli", "mcp", "--root", str(root)], env=env)
            stdio_times = anyio.run(_latency, stdio, str(kernel))
        for name, times in (("http", http_times), ("stdio", stdio_times)):
            results[f"suggest_latency_{name}"] = {"calls": len(times), "median_s": statistics.median(times), "p95_s": _percentile(times, 0.95),
                                                  "min_s": min(times), "max_s": max(times)}
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
        shutil.rmtree(root, ignore_errors=True)

    table = Table(title=f"patterns mcp ({results['machine']}, Python {results['python']})", title_justify="left")
    for col in ("what", "calls", "errors", "time", "server RSS MiB"):
        table.add_column(col, justify="left" if col == "what" else "right")
    table.add_row("started, no call yet", "", "", "", f"{results['rss_mib_start']:.1f}")
    table.add_row("warm-up (one of each tool)", str(len(calls)), str(len(results["warm_up_errors"])), "", f"{results['rss_mib_warm']:.1f}")
    s, c, a = results["sequential"], results["concurrent"], results["sequential_again"]
    table.add_row("sequential, one session", str(s["calls"]), str(s["errors"]), f"{s['seconds']:.1f} s", f"{results['rss_mib_after_sequential']:.1f}")
    table.add_row(f"{c['clients']} clients at once", str(c["calls"]), str(c["errors"]), f"{c['seconds']:.1f} s", f"{results['rss_mib_after_concurrent']:.1f}")
    table.add_row("sequential again", str(a["calls"]), str(a["errors"]), f"{a['seconds']:.1f} s", f"{results['rss_mib_after_sequential_again']:.1f}")
    for name in ("http", "stdio"):
        lat = results[f"suggest_latency_{name}"]
        table.add_row(f"suggest over {name}, warm", str(lat["calls"]), "0", f"median {lat['median_s'] * 1000:.0f} ms, p95 {lat['p95_s'] * 1000:.0f} ms", "")
    console.print(table)
    tools = Table(title="median per tool call (first 200)", title_justify="left")
    tools.add_column("tool")
    tools.add_column("median", justify="right")
    for name, t in s["median_s_by_tool"].items():
        tools.add_row(name, f"{t * 1000:.0f} ms")
    console.print(tools)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(results, indent=2) + "\n")
    return 0 if not results["warm_up_errors"] and s["errors"] == 0 and c["errors"] == 0 and a["errors"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
