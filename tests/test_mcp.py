"""`patterns mcp`, driven by the MCP SDK's own client over stdio and over HTTP on 127.0.0.1.

Every tool is called on the bundled KDA decode kernel (suggest, apply), the test
op of tests/validation_op (validate), the library (list, show, search) and a
stored review item, and must return what the CLI's `--format json` prints for
the same input. Writes outside the server's root are refused; arguments that do
not fit a tool's schema give a one-line tool error and the server keeps serving.
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest

pytest.importorskip("mcp")

from mcp import Client, StdioServerParameters  # noqa: E402

from patterns.api import UsageError  # noqa: E402
from patterns.catalog import pattern_markdown  # noqa: E402
from patterns.cli import main  # noqa: E402
from patterns.core.library import get, load_library  # noqa: E402
from patterns.core.records import CheckResult, EvidenceBundle, Hypothesis, ReviewItem
from patterns.core.schema import Safety  # noqa: E402
from patterns.mcp_server import PatternsServer, parse_http  # noqa: E402
from patterns.validation.bundle import write_bundle  # noqa: E402
from patterns.core.ops import kernels_dir  # noqa: E402

HERE = Path(__file__).parent
SPEC = HERE / "validation_op" / "spec_small.py"
HONEST = HERE / "candidates" / "honest_rowdot.py"
TOOLS = {"suggest", "show", "search", "list", "apply", "validate", "review_list", "review_show"}
SHAPES = {"B": 1, "T": 1, "H": 32, "HV": 32, "K": 128, "V": 128}
REVIEW_ID = "rowdot-0123456789"


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """A server root holding a copy of the KDA decode kernel, a file outside it, and an agent home with one review item."""
    base = tmp_path_factory.mktemp("mcp")
    root = base / "root"
    (root / "kda").mkdir(parents=True)
    shutil.copy(kernels_dir() / "kda_decode" / "baseline.py", root / "kda" / "baseline.py")
    outside = base / "outside"
    outside.mkdir()
    shutil.copy(root / "kda" / "baseline.py", outside / "baseline.py")
    (root / "link.py").symlink_to(outside / "baseline.py")  # inside by name, outside in fact
    home = base / "agent"
    bundle = EvidenceBundle(op="rowdot", candidate=str(HONEST), baseline=str(HERE / "validation_op" / "baseline.py"),
                            checks=[CheckResult(name="correctness", layer="correctness", passed=True, reason="within tolerance")])
    bundle_json, _ = write_bundle(bundle, base / "bundles")
    item = ReviewItem(
        id=REVIEW_ID, op="rowdot", run="rowdot-1", target=str(root / "kda" / "baseline.py"), target_sha256="0" * 64,
        symbol="rowdot", pattern_id="cache_eviction_hints", safety=Safety.exact, candidate=str(HONEST), candidate_sha256="1" * 64,
        diff="--- a\n+++ b\n", bundle=str(bundle_json), device="cpu", grid="first 1 of 1 shapes",
        hypothesis=Hypothesis(pattern_id="cache_eviction_hints", text="streamed loads", prediction="fewer L2 misses"),
        created="2026-01-01T00:00:00+00:00",
    )
    (home / "reviews").mkdir(parents=True)
    (home / "reviews" / f"{item.id}.json").write_text(item.model_dump_json(indent=2))
    env = {**os.environ, "PATTERNS_AGENT_HOME": str(home), "HF_HUB_OFFLINE": "1", "TRITON_INTERPRET": "1"}
    return {"base": base, "root": root, "outside": outside, "env": env, "kernel": root / "kda" / "baseline.py"}


def checks(bundle: dict) -> list[tuple]:
    """The checks as comparable rows; the "fresh shape" integrity probe draws its shape anew at every
    validation (so a candidate cannot memoise it): of that one, its dimension names and verdict are compared."""
    def fresh(c: dict) -> bool:
        return c["name"] == "fresh shape"

    return [(c["name"], c["layer"], c["passed"], re.sub(r"\d+", "#", c["reason"]) if fresh(c) else c["reason"],
             json.dumps(sorted(c["shape"]) if fresh(c) else c["shape"])) for c in bundle["checks"]]


def run_cli(home: str, args: list[str]) -> tuple[int, str, str]:
    """The CLI in this process: exit code, stdout, stderr."""
    out, err = io.StringIO(), io.StringIO()
    code = 0
    with pytest.MonkeyPatch.context() as mp, contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        mp.setenv("PATTERNS_AGENT_HOME", home)
        try:
            main(args)
        except SystemExit as exc:
            code = exc.code or 0
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def expected(world: dict, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """What the CLI prints for each call the tests make through the server."""
    kernel = str(world["kernel"])
    shape_args = [a for k, v in SHAPES.items() for a in ("--shape", f"{k}={v}")]
    calls = {
        "list": ["list", "--bottleneck", "numerics-risk", "--format", "json"],
        "show": ["show", "tf32x3_dot_precision", "--format", "json"],
        "search": ["search", "decode under-fills the GPU", "--top", "4", "--format", "json"],
        "suggest": ["suggest", kernel, *shape_args, "--dtype", "state=fp32", "--format", "json"],
        "apply": ["apply", "cache_eviction_hints", kernel],
        "apply_noop": ["apply", "split_underfilled_grid", kernel],
        "show_unknown": ["show", "no_such_pattern"],
        "validate": ["validate", str(SPEC), str(HONEST), "--device", "cpu", "--out", str(tmp_path_factory.mktemp("cli-evidence")), "--format", "json"],
        "review_list": ["review", "list", "--format", "json"],
        "review_show": ["review", "show", REVIEW_ID, "--format", "json"],
    }
    return {name: run_cli(world["env"]["PATTERNS_AGENT_HOME"], args) for name, args in calls.items()}


def text(result) -> str:
    assert len(result.content) == 1, result.content
    return result.content[0].text


async def exercise(client: Client, world: dict) -> dict:
    """Call every tool once the way the CLI calls were made, plus the refusals and malformed calls."""
    kernel = str(world["kernel"])
    r = {"tools": {t.name: t for t in (await client.list_tools()).tools}}
    r["list"] = await client.call_tool("list", {"bottleneck": "numerics-risk"})
    r["show"] = await client.call_tool("show", {"id": "tf32x3_dot_precision"})
    r["search"] = await client.call_tool("search", {"text": "decode under-fills the GPU", "top": 4})
    r["suggest"] = await client.call_tool("suggest", {"path": kernel, "shapes": SHAPES, "dtypes": {"state": "fp32"}})
    r["suggest_relative"] = await client.call_tool("suggest", {"path": "kda/baseline.py", "shapes": SHAPES, "dtypes": {"state": "fp32"}})
    r["suggest_source"] = await client.call_tool("suggest", {"source": world["kernel"].read_text(), "path": "kda/baseline.py",
                                                             "shapes": SHAPES, "dtypes": {"state": "fp32"}})
    r["apply"] = await client.call_tool("apply", {"pattern_id": "cache_eviction_hints", "path": kernel})
    r["apply_noop"] = await client.call_tool("apply", {"pattern_id": "split_underfilled_grid", "path": kernel})
    r["apply_outside"] = await client.call_tool("apply", {"pattern_id": "cache_eviction_hints", "path": str(world["outside"] / "baseline.py"), "write": True})
    r["apply_link"] = await client.call_tool("apply", {"pattern_id": "cache_eviction_hints", "path": "link.py", "write": True})
    r["show_unknown"] = await client.call_tool("show", {"id": "no_such_pattern"})
    r["validate"] = await client.call_tool("validate", {"op": str(SPEC), "candidate": str(HONEST), "device": "cpu"})
    r["validate_outside"] = await client.call_tool("validate", {"op": str(SPEC), "candidate": str(HONEST), "out": str(world["outside"])})
    r["review_list"] = await client.call_tool("review_list", {})
    r["review_show"] = await client.call_tool("review_show", {"id": REVIEW_ID})
    r["bad_type"] = await client.call_tool("suggest", {"path": kernel, "shapes": {"B": "eight"}})
    r["bad_missing"] = await client.call_tool("show", {})
    r["bad_enum"] = await client.call_tool("list", {"bottleneck": "slow"})
    r["bad_shape"] = await client.call_tool("suggest", {"path": kernel, "shapes": {"B": 0}})
    r["no_tool"] = await client.call_tool("no_such_tool", {})
    r["after_errors"] = await client.call_tool("list", {"bottleneck": "numerics-risk"})
    r["resources"] = (await client.list_resources()).resources
    r["resource"] = await client.read_resource(r["resources"][0].uri)
    return r


def check_against_cli(r: dict, expected: dict, world: dict) -> None:
    assert set(r["tools"]) == TOOLS
    for tool in r["tools"].values():  # typed schemas: every argument has a type (or an enum / a union of types)
        assert tool.description, tool.name
        for name, prop in tool.input_schema["properties"].items():
            assert {"type", "anyOf", "enum", "$ref"} & set(prop), (tool.name, name, prop)
    assert r["tools"]["show"].input_schema["required"] == ["id"]
    assert r["tools"]["suggest"].input_schema["properties"]["shapes"]["additionalProperties"] == {"type": "integer"}

    for name in ("list", "show", "search", "suggest", "review_list", "review_show"):
        code, out, _ = expected[name]
        assert code == 0 and not r[name].is_error, (name, text(r[name]))
        assert json.loads(text(r[name])) == json.loads(out), name
    assert [p["id"] for p in json.loads(text(r["list"]))] == [
        "fp32_accumulator", "fp8_block_scaling", "int64_offsets", "max_shifted_exp", "per_token_group_quant",
        "stable_softplus", "tf32x3_dot_precision", "ue8m0_power_of_two_scales", "welford_reduction"]
    assert json.loads(text(r["show"]))["diff"].startswith("--- tf32x3_dot_precision/before.py")
    assert json.loads(text(r["review_show"]))["verdict"] == "pass"

    suggested = json.loads(text(r["suggest"]))
    assert suggested["kernels"][0]["kernel"] == "kda_decode_fwd_kernel" and suggested["kernels"][0]["suggestions"]
    relative = json.loads(text(r["suggest_relative"]))
    source = json.loads(text(r["suggest_source"]))
    assert relative == suggested  # relative paths are read from the root
    assert source["file"] == "kda/baseline.py" and source["kernels"][0]["suggestions"] == suggested["kernels"][0]["suggestions"]

    code, out, _ = expected["apply"]
    applied = json.loads(text(r["apply"]))
    assert code == 0 and applied["diff"] == out and applied["diff"].count("eviction_policy=") >= 2
    assert (applied["applied"], applied["written"], applied["safety"]) == (True, False, "exact")
    noop = json.loads(text(r["apply_noop"]))
    assert noop["applied"] is False and expected["apply_noop"][2].strip() == f"no-op: {noop['no_op']}"

    for name in ("apply_outside", "apply_link", "validate_outside"):
        assert r[name].is_error and "outside the folder this server may write" in text(r[name]), name
    assert (world["outside"] / "baseline.py").read_bytes() == (kernels_dir() / "kda_decode" / "baseline.py").read_bytes()
    assert not list(world["outside"].glob("*.orig")) and not list(world["outside"].glob("*.json"))

    code, _, err = expected["show_unknown"]
    assert code == 2 and r["show_unknown"].is_error and text(r["show_unknown"]) == err.strip()

    code, out, _ = expected["validate"]
    validated = json.loads(text(r["validate"]))
    assert code == 0 and validated["passed"] and validated["verdict"].startswith("pass")
    assert checks(validated["bundle"]) == checks(json.loads(out))
    assert Path(validated["evidence"]["json"]).parent == world["root"] / "evidence" and Path(validated["evidence"]["json"]).exists()

    for name, start in (("bad_type", "error: suggest: shapes.B: "), ("bad_missing", "error: show: id: Field required"),
                        ("bad_enum", "error: list: bottleneck: "), ("bad_shape", "error: shape B: must be positive, got 0"),
                        ("no_tool", "Unknown tool")):
        assert r[name].is_error, name
        assert text(r[name]).startswith(start) and "\n" not in text(r[name]), (name, text(r[name]))
    assert not r["after_errors"].is_error and json.loads(text(r["after_errors"])) == json.loads(expected["list"][1])

    ids = sorted(e.id for e in load_library())
    assert sorted(str(res.uri).removeprefix("patterns://library/") for res in r["resources"]) == ids
    first = r["resources"][0]
    assert first.mime_type == "text/markdown"
    assert r["resource"].contents[0].text == pattern_markdown(get(first.name))


def test_stdio(world: dict, expected: dict) -> None:
    params = StdioServerParameters(command=sys.executable, args=["-m", "patterns.cli", "mcp", "--root", str(world["root"])],
                                   env=world["env"], cwd=str(world["base"]))

    async def session() -> dict:
        async with Client(params, read_timeout_seconds=300) as client:
            return await exercise(client, world)

    check_against_cli(anyio.run(session), expected, world)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def http_server(world: dict):
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "patterns.cli", "mcp", "--http", f"127.0.0.1:{port}", "--root", str(world["root"])],
                            env=world["env"], cwd=str(world["base"]), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"server exited {proc.returncode}: {proc.stderr.read()}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            time.sleep(0.2)
    else:
        proc.kill()
        pytest.fail("server did not listen within 120 s")
    yield f"http://127.0.0.1:{port}/mcp"
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()


def test_http(world: dict, expected: dict, http_server: str) -> None:
    async def session() -> dict:
        async with Client(http_server, read_timeout_seconds=300) as client:
            return await exercise(client, world)

    check_against_cli(anyio.run(session), expected, world)


def test_http_write_inside_root(world: dict, http_server: str) -> None:
    """apply with write=true inside the root: the CLI's write path (atomic, FILE.orig backup)."""
    target = world["root"] / "write" / "baseline.py"
    target.parent.mkdir()
    shutil.copy(world["kernel"], target)
    before = target.read_text()

    async def session():
        async with Client(http_server, read_timeout_seconds=300) as client:
            return await client.call_tool("apply", {"pattern_id": "cache_eviction_hints", "path": "write/baseline.py", "write": True})

    result = json.loads(text(anyio.run(session)))
    assert result["written"] and Path(result["backup"]) == target.with_name("baseline.py.orig")
    assert target.with_name("baseline.py.orig").read_text() == before
    after = target.read_text()
    assert after != before and after.count("eviction_policy=") >= 2
    assert json.loads(text(anyio.run(session)))["applied"] is False  # now a no-op


def test_http_binds_loopback_unless_host_is_given() -> None:
    assert parse_http("8765", None) == ("127.0.0.1", 8765)
    assert parse_http("127.0.0.1:8765", None) == ("127.0.0.1", 8765)
    assert parse_http("[::1]:8765", None) == ("::1", 8765)
    with pytest.raises(UsageError, match="not a loopback address; to serve beyond this machine pass --host 0.0.0.0"):
        parse_http("0.0.0.0:8765", None)
    assert parse_http("8765", "0.0.0.0") == ("0.0.0.0", 8765)
    with pytest.raises(UsageError, match="port 0 is not between"):
        parse_http("127.0.0.1:0", None)
    with pytest.raises(UsageError, match="expected"):
        parse_http("127.0.0.1:http", None)


def test_mcp_cli_bad_input_is_one_line(capsys: pytest.CaptureFixture, tmp_path: Path) -> None:
    for args, message in ((["mcp", "--http", "10.1.2.3:9000"], "error: --http: 10.1.2.3 is not a loopback address"),
                          (["mcp", "--host", "0.0.0.0"], "error: --host: only with --http"),
                          (["mcp", "--root", str(tmp_path / "missing")], "not a folder")):
        with pytest.raises(SystemExit) as exc:
            main(args)
        err = capsys.readouterr().err.strip()
        assert exc.value.code == 2 and message in err and "\n" not in err, err


def test_server_roots_relative_paths(world: dict) -> None:
    server = PatternsServer(world["root"])
    assert server.path("kda/baseline.py") == world["root"].resolve() / "kda" / "baseline.py"
    assert server.path(str(world["outside"])) == world["outside"]
