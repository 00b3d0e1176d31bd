"""`patterns mcp`: the library and its verbs as an MCP server, for coding agents.

Built on the official `mcp` SDK (`MCPServer`). Every tool is a thin layer over
the function in `patterns.api` that the CLI calls, and returns the JSON the
CLI's `--format json` prints; an error the CLI would print as `error: ...`
comes back as a tool error with that same line. Arguments are typed, so each
tool's input schema says what it takes; arguments that do not fit it give a
one-line tool error too.

- Tools: suggest, show, search, list, apply, validate, review_list, review_show.
- Resources: `patterns://library/<id>`, one per pattern, its catalog page as Markdown.
- Files: relative paths are read from the server's root (`--root`, default the
  folder it was started in). `apply` writes only with `write=true` and only
  inside the root, through the CLI's write path (atomic, FILE.orig backup,
  refused if the file changed since it was read); `validate` writes its
  evidence bundle inside the root.
- Calls run on worker threads, so one session's slow call does not stall the
  others' transport; the library and retrieval calls take one lock, the gate
  another (it validates one candidate at a time, as on the command line).

Transports: stdio (default), or streamable HTTP with `--http [HOST:]PORT`,
which binds the loopback interface only unless `--host` names another
interface explicitly.
"""
from __future__ import annotations

import functools
import ipaddress
import json
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, ValidationError

from patterns import api
from patterns.core.hardware import GPUS
from patterns.core.library import load_library
from patterns.core.schema import BottleneckClass, Category, Safety, Status

RESOURCE_PREFIX = "patterns://library/"
Arch = Literal[tuple(GPUS)]  # type: ignore[valid-type]  # the hardware table's names, as the schema's enum
Project = Literal["sglang", "fla", "deepgemm"]

INSTRUCTIONS = """\
patterns is a knowledge base of proven optimization techniques for Triton GPU kernels (from SGLang,
Flash Linear Attention and DeepGEMM). Call `suggest` on a kernel file (or its source) to get each
kernel's bottleneck and the patterns that fit it, `show` for one pattern's mechanism, conditions,
evidence and before->after diff, `apply` for the automatic rewrite as a diff (write=true writes it),
and `validate` to run the gate (correctness, partitions, integrity, timing on a GPU) on a candidate.
Only `exact` rewrites may merge without a person's review."""


class ToolArgumentError(ValueError):
    """Arguments that do not fit a tool's input schema, as one line."""


def _one_line(tool: str, exc: ValidationError) -> str:
    problems = []
    for err in exc.errors():
        where = ".".join(str(part) for part in err["loc"]) or "arguments"
        problems.append(f"{where}: {err['msg']}")
    return f"error: {tool}: " + "; ".join(problems)


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def parse_http(addr: str, host: str | None) -> tuple[str, int]:
    """`--http [HOST:]PORT` and `--host HOST` to the address to bind; a non-loopback host must come from --host."""
    bind, sep, port_text = addr.rpartition(":")
    if not sep:
        bind, port_text = "127.0.0.1", addr
    try:
        port = int(port_text)
    except ValueError:
        raise api.UsageError(f"--http: expected [HOST:]PORT, got '{addr}'") from None
    if not 0 < port < 65536:
        raise api.UsageError(f"--http: port {port} is not between 1 and 65535")
    bind = bind.strip("[]") or "127.0.0.1"
    if host is not None:
        if sep and bind != host:
            raise api.UsageError(f"--http names host {bind} and --host names {host}: give one")
        return host, port
    if not _is_loopback(bind):
        raise api.UsageError(f"--http: {bind} is not a loopback address; to serve beyond this machine pass --host {bind}")
    return bind, port


class PatternsServer:
    """The tools and resources over one root folder. `build()` makes the SDK server."""

    def __init__(self, root: Path, chroma_url: str | None = None):
        self.root = Path(os.path.realpath(root))
        self.chroma_url = chroma_url
        self.library_lock = threading.Lock()  # library, index and rewrites: not written for concurrent threads
        self.gate_lock = threading.Lock()  # the gate runs one candidate at a time

    def path(self, value: str) -> Path:
        p = Path(value).expanduser()
        return p if p.is_absolute() else self.root / p

    # tools: each calls one function of patterns.api ------------------------------------
    def suggest(
        self,
        path: Annotated[str | None, Field(description="kernel file (relative to the server's root); with `source`, only its name")] = None,
        source: Annotated[str | None, Field(description="the kernel file's text, instead of reading `path`")] = None,
        kernel: Annotated[str | None, Field(description="only this kernel of the file")] = None,
        shapes: Annotated[dict[str, int], Field(description="shape variables, e.g. {\"B\": 8, \"T\": 1, \"H\": 32, \"K\": 128}")] = {},  # noqa: B006
        dtype: Annotated[str, Field(description="element type of the tensors (bf16, fp16, fp32, fp8, ...)")] = "bfloat16",
        dtypes: Annotated[dict[str, str], Field(description="element type of single pointers, e.g. {\"state\": \"fp32\"}")] = {},  # noqa: B006
        arch: Annotated[Arch, Field(description="target GPU")] = "h200",
        profile: Annotated[str | None, Field(description="ncu --csv --page raw export, torch.profiler trace or evidence bundle")] = None,
        top: Annotated[int, Field(ge=1, description="suggestions per kernel")] = 5,
    ) -> dict:
        """Each kernel's bottleneck (with the numbers behind it) and the ranked patterns that fit it: the JSON of
        `patterns suggest --format json` (docs/suggest.schema.json)."""
        with self.library_lock:
            report = api.suggest_report(
                self.path(path) if path is not None and source is None else (Path(path) if path else None),
                source=source, kernel=kernel, shapes=shapes, dtype=dtype, dtypes=dtypes, arch=arch,
                profile=self.path(profile) if profile else None, top=top, chroma_url=self.chroma_url,
            )
        return report.model_dump(mode="json")

    def show(self, id: Annotated[str, Field(description="pattern id, e.g. tf32x3_dot_precision")]) -> dict:
        """One pattern: mechanism and arithmetic, conditions, limits, safety, evidence, traps, and the before→after
        diff of its examples (`diff`): `patterns show ID --format json`."""
        with self.library_lock:
            return api.show_pattern(id)

    def search(
        self,
        text: Annotated[str, Field(description="what you look for, e.g. 'decode under-fills the GPU'")],
        top: Annotated[int, Field(ge=1, description="how many results")] = 8,
        keyword: Annotated[bool, Field(description="keyword matching only (no embedding index)")] = False,
    ) -> list[dict]:
        """Semantic search over the library blended with keyword matches: `patterns search TEXT --format json`."""
        with self.library_lock:
            return api.search_patterns(text, top=top, keyword=keyword, chroma_url=self.chroma_url)

    def list(
        self,
        category: Category | None = None,
        bottleneck: BottleneckClass | None = None,
        project: Annotated[Project | None, Field(description="only patterns with evidence in this upstream project")] = None,
        safety: Safety | None = None,
        status: Status | None = None,
    ) -> list[dict]:
        """The library's patterns, filtered: `patterns list --format json`."""
        with self.library_lock:
            return api.list_patterns(category, bottleneck, project, safety, status)

    def apply(
        self,
        pattern_id: Annotated[str, Field(description="pattern to apply")],
        path: Annotated[str, Field(description="kernel file to rewrite (relative to the server's root)")],
        kernel: Annotated[str | None, Field(description="kernel to rewrite when the file has several")] = None,
        params: Annotated[dict[str, str | int | float | bool], Field(description="rewrite parameters (see `show`: transformation.params)")] = {},  # noqa: B006
        write: Annotated[bool, Field(description="write the change (atomically, keeping FILE.orig); only inside the server's root")] = False,
    ) -> dict:
        """A pattern's automatic rewrite of a file as a unified diff (`diff`), with its safety and what review it
        needs; with write=true the file is written, as `patterns apply --write` does. An already-applied pattern
        gives applied=false and the reason in `no_op`."""
        values = {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in params.items()}
        with self.library_lock:
            return api.apply_pattern(pattern_id, self.path(path), kernel=kernel, params=values, write=write, root=self.root)

    def validate(
        self,
        op: Annotated[str, Field(description="op under kernels/ (e.g. kda_decode), or a path to an op's spec.py")],
        candidate: Annotated[str | None, Field(description="candidate file, a rewritten copy of the op's baseline (default: the baseline)")] = None,
        device: Literal["auto", "cpu", "cuda"] = "auto",
        pattern: Annotated[str | None, Field(description="the pattern the candidate applies: its max_cost sets the speed rule")] = None,
        out: Annotated[str, Field(description="folder for the evidence bundle, inside the server's root")] = "evidence",
    ) -> dict:
        """The gate: correctness over the op's shape grid, partitioned vs unpartitioned error, integrity checks,
        and (GPU only) timing. Returns the verdict, where the evidence bundle was written, and the bundle
        (`patterns validate --format json`)."""
        out_dir = self.path(out)
        if not api.inside(out_dir, self.root):
            raise api.UsageError(f"{out_dir}: outside the folder this server may write ({self.root}); refusing to write the evidence there")
        spec = self.path(op)
        with self.gate_lock:
            return api.validate_candidate(str(spec) if spec.is_file() else op, self.path(candidate) if candidate else None,
                                          out=out_dir, device=device, pattern=pattern)

    def review_list(
        self,
        status: Literal["pending", "accepted", "rejected", "all"] = "pending",
        op: Annotated[str | None, Field(description="only this op")] = None,
    ) -> list[dict]:
        """The agent's review items (hypothesis, candidate, diff, gate evidence): `patterns review list --format json`."""
        with self.library_lock:
            return api.review_items(status, op)

    def review_show(self, id: Annotated[str, Field(description="review item id, e.g. kda_decode-0123456789")]) -> dict:
        """One review item with its evidence bundle's verdict and checks: `patterns review show ID --format json`."""
        with self.library_lock:
            return api.review_item(id)

    TOOLS = ("suggest", "show", "search", "list", "apply", "validate", "review_list", "review_show")

    # the SDK server ---------------------------------------------------------------------
    def build(self):
        from mcp.server.mcpserver import MCPServer
        from mcp.server.mcpserver.exceptions import ToolError
        from mcp.server.mcpserver.resources import FunctionResource
        from mcp.types import CallToolResult, TextContent

        errors = api.user_errors()

        def tool(fn: Callable[..., Any]) -> Callable[..., Any]:
            @functools.wraps(fn)
            def call(*args, **kwargs):
                try:
                    result = fn(*args, **kwargs)
                except errors as exc:  # the CLI's `error: ...` line, as a tool error
                    return CallToolResult(content=[TextContent(type="text", text=f"error: {exc}")], is_error=True)
                return CallToolResult(content=[TextContent(type="text", text=json.dumps(result, indent=2))])

            return call

        class Server(MCPServer):
            async def call_tool(self, name, arguments, context=None):
                try:
                    return await super().call_tool(name, arguments, context)
                except ToolError as exc:
                    if isinstance(exc.__cause__, ValidationError):  # the SDK's message spans lines
                        raise ToolError(_one_line(name, exc.__cause__)) from exc.__cause__
                    raise

        from patterns import __version__

        server = Server("patterns", instructions=INSTRUCTIONS, version=__version__, log_level="WARNING")
        for name in self.TOOLS:
            fn = getattr(self, name)
            server.add_tool(tool(fn), name=name, description=" ".join((fn.__doc__ or "").split()), structured_output=False)
        for entry in load_library():
            server.add_resource(FunctionResource(
                uri=RESOURCE_PREFIX + entry.id, name=entry.id, title=entry.pattern.title,
                description=" ".join(entry.pattern.summary.split()), mime_type="text/markdown",
                fn=functools.partial(self.page, entry.id),
            ))
        return server

    def page(self, pattern_id: str) -> str:
        """A pattern's catalog page as Markdown, from the library as it is now."""
        from patterns.catalog import pattern_markdown
        from patterns.core.library import get

        with self.library_lock:
            return pattern_markdown(get(pattern_id))


def serve(root: Path, http: str | None = None, host: str | None = None, chroma_url: str | None = None,
          announce: Callable[[str], None] | None = None) -> None:
    """Run the server until it is stopped: on stdio, or streamable HTTP at /mcp."""
    try:
        import mcp  # noqa: F401
    except ImportError:
        raise api.UsageError("patterns mcp needs the MCP SDK: pip install 'patterns[mcp]'") from None
    bind = parse_http(http, host) if http is not None else None
    if not Path(root).is_dir():
        raise api.UsageError(f"--root: {root}: not a folder")
    server = PatternsServer(root, chroma_url).build()
    say = announce or (lambda line: None)
    if bind is None:
        say(f"patterns MCP server on stdio (root {Path(root).resolve()})")  # stderr: stdout carries the protocol
        server.run("stdio")
        return
    shown = f"[{bind[0]}]" if ":" in bind[0] else bind[0]
    say(f"patterns MCP server on http://{shown}:{bind[1]}/mcp (root {Path(root).resolve()})")
    server.run("streamable-http", host=bind[0], port=bind[1])
