"""The distiller: sources, Python and CUDA facts, cross-file links, detection, drafts, --write, LLM.

Fixtures in tests/distill_fixtures are small kernels and bindings written for
these tests (no upstream code): each detector has a positive and a negative
case. Full-wheel runs belong to the benchmark (python -m patterns.distill.bench).
"""
from __future__ import annotations

import json
import shutil
import textwrap
import zipfile
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from patterns.cli import app
from patterns.distill.bench import detections_table
from patterns.distill.cache import FactsCache
from patterns.distill.link import link
from patterns.distill.native import extract_native
from patterns.distill.pyfacts import extract_python
from patterns.distill.run import distill, write_drafts
from patterns.distill.scan import scan
from patterns.distill.sources import resolve
from patterns.core.facts import extract_source
from patterns.core.library import load_library
from patterns.core.predicates import Subject, evaluate
from patterns.core.facts_types import FileFacts
from patterns.core.records import Draft
from patterns.core.schema import Condition, Pattern

from openai_stub_server import Error, serve

FIX = Path(__file__).parent / "distill_fixtures"
PKG = FIX / "pkg"
NATIVE = FIX / "native"
runner = CliRunner()


@pytest.fixture(autouse=True)
def _isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("PATTERNS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    for var in ("PATTERNS_LLM_BASE_URL", "PATTERNS_LLM_MODEL", "PATTERNS_LLM_API_KEY", "OPENAI_API_KEY"):
        monkeypatch.delenv(var, raising=False)


def holds(cond: dict | str, facts: FileFacts, kernel: str | None = None) -> bool:
    c = Condition.model_validate(cond)
    k = facts.kernel(kernel) if kernel else None
    return evaluate(c, Subject(facts, k)).ok


def native_fn(path: Path, fn: str) -> FileFacts:
    nat = extract_native(path.read_bytes(), path.name)
    f = next(x for x in nat.functions if x.name == fn)
    sub = nat.model_copy(update={"functions": [f], "constructs": [], "bindings": [b for b in nat.bindings if f.line <= b.line <= f.end_line]})
    return FileFacts(path=path.name, native=sub)


# --------------------------------------------------------------------------------------
# native detectors: one positive and one negative function each
# --------------------------------------------------------------------------------------

NATIVE_CASES = [
    ("tma_copy", "tma_pipeline.cuh", "fp8_gemm_kernel", True),
    ("tma_copy", "plain.cu", "scale_kernel", False),
    ("tma_descriptor", "tma_pipeline.cuh", "fp8_gemm_kernel", True),
    ("tma_descriptor", "plain.cu", "scale_kernel", False),
    ("mbarrier", "tma_pipeline.cuh", "fp8_gemm_kernel", True),
    ("mbarrier", "plain.cu", "grid_stride_copy", False),
    ("wgmma", "tma_pipeline.cuh", "fp8_gemm_kernel", True),
    ("wgmma", "plain.cu", "scale_kernel", False),
    ("reg_realloc", "tma_pipeline.cuh", "fp8_gemm_kernel", True),
    ("reg_realloc", "plain.cu", "scale_kernel", False),
    ("persistent_loop", "tma_pipeline.cuh", "fp8_gemm_kernel", True),
    ("persistent_loop", "plain.cu", "grid_stride_copy", True),  # a grid-stride loop is the persistent idiom too
    ("persistent_loop", "plain.cu", "scale_kernel", False),
    ("fp8", "tma_pipeline.cuh", "fp8_gemm_kernel", True),
    ("fp8", "plain.cu", "scale_kernel", False),
    ("scale_promotion", "tma_pipeline.cuh", "fp8_gemm_kernel", True),
    ("scale_promotion", "plain.cu", "grid_stride_copy", False),
    ("pdl", "tma_pipeline.cuh", "fp8_gemm_kernel", True),
    ("pdl", "plain.cu", "scale_kernel", False),
    ("launch_bounds", "tma_pipeline.cuh", "fp8_gemm_kernel", True),
    ("launch_bounds", "plain.cu", "scale_kernel", False),
    ("constexpr_dispatch", "tma_pipeline.cuh", "fp8_gemm_kernel", True),
    ("constexpr_dispatch", "plain.cu", "scale_kernel", False),
    ("gil_release", "bind_release.cpp", "wait_stream", True),
    ("gil_release", "bind_hold.cpp", "wait_stream", False),
    ("blocking_wait", "bind_hold.cpp", "wait_stream", True),
    ("blocking_wait", "plain.cu", "launch", False),
]


@pytest.mark.parametrize("kind,file,fn,expected", NATIVE_CASES, ids=[f"{k}-{fn}-{e}" for k, _, fn, e in NATIVE_CASES])
def test_native_construct(kind, file, fn, expected):
    assert holds({"native_construct": {"kinds": [kind]}}, native_fn(NATIVE / file, fn)) is expected


def test_native_kinds_are_the_core_vocabulary():
    """The extractor produces only the kinds the core declares, which the native_construct predicate accepts."""
    from patterns.core.facts_types import NATIVE_KINDS
    from patterns.distill.native import RULES

    produced = {c.kind for f in NATIVE.iterdir() for c in extract_native(f.read_bytes(), f.name).all_constructs()}
    assert set(RULES) <= set(NATIVE_KINDS) and produced <= set(NATIVE_KINDS)
    assert produced - set(RULES) == set(NATIVE_KINDS) - set(RULES)  # each kind read from the tree occurs in a fixture


def test_template_specialization_is_file_level():
    nat = extract_native((NATIVE / "tma_pipeline.cuh").read_bytes(), "x.cuh")
    spec = [c for c in nat.constructs if c.kind == "template_specialization"]
    assert spec and spec[0].name == "struct LoadOp<2>" and spec[0].line == 10
    assert not [c for c in extract_native((NATIVE / "plain.cu").read_bytes(), "p.cu").constructs]


def test_native_kernel_and_template_params():
    nat = extract_native((NATIVE / "tma_pipeline.cuh").read_bytes(), "x.cuh")
    k = next(f for f in nat.functions if f.name == "fp8_gemm_kernel")
    assert k.is_kernel and k.template_params == ["BLOCK_M", "BLOCK_N", "kNumStages"]
    facts = FileFacts(path="x.cuh", native=nat)
    assert holds({"native_kernel": {"template": True, "min_template_params": 3, "launch_bounds": True}}, facts)
    assert not holds({"native_kernel": {"template": True}}, FileFacts(path="p.cu", native=extract_native((NATIVE / "plain.cu").read_bytes(), "p.cu")))


@pytest.mark.parametrize("file,name,releases,blocking", [
    ("bind_release.cpp", "wait_stream", True, True),      # gil_scoped_release in the bound body
    ("bind_release.cpp", "copy_blocking", True, True),    # call_guard<gil_scoped_release>
    ("bind_release.cpp", "outer", True, True),            # released in a function the bound one calls
    ("bind_hold.cpp", "wait_stream", False, True),        # waits on the device holding the GIL
    ("bind_hold.cpp", "nap", False, True),                # a lambda that sleeps holding the GIL
    ("bind_hold.cpp", "version", False, False),
])
def test_pybind_bindings(file, name, releases, blocking):
    nat = extract_native((NATIVE / file).read_bytes(), file)
    b = next(x for x in nat.bindings if x.name == name)
    assert (b.releases_gil, bool(b.blocking)) == (releases, blocking)
    facts = FileFacts(path=file, native=nat)
    assert holds({"pybind_binding": {"releases_gil": False, "blocking": True}}, facts) is (file == "bind_hold.cpp")


def test_native_odd_input_never_raises():
    for data in (b"", b"\xff\xfe garbage {{{{ ((((", b"template <> <<<>>> ;;;", b"#define X(" * 1000):
        nat = extract_native(data, "odd.cu")
        assert isinstance(nat.functions, list)


def test_native_facts_are_in_source_order():
    data = (NATIVE / "tma_pipeline.cuh").read_bytes()
    first = extract_native(data, "x.cuh")
    assert all(extract_native(data, "x.cuh") == first for _ in range(3))
    assert first.includes == ["cute/arch/copy_sm90_tma.hpp", "cutlass/arch/barrier.h"]
    lines = [c.line for c in next(f for f in first.functions if f.name == "fp8_gemm_kernel").constructs]
    assert lines == sorted(lines)


def test_deleted_members_are_not_functions():
    src = b"""class Guard {
    public:
        Guard() { release.emplace(); }
        Guard(const Guard&) = delete;
        Guard& operator=(const Guard&) = delete;
        Guard& operator+=(const Guard& other) { merge(other); return *this; }
    };"""
    nat = extract_native(src, "guard.hpp")
    assert [(f.name, f.line) for f in nat.functions] == [("Guard", 3), ("operator+=", 6)]


# the library's native present_when branches: DeepGEMM-style Hopper code on one side, a
# function with only part of the technique on the other (None: the whole file)
HOPPER_CASES = [
    ("warp_specialization", "tma_pipeline.cuh", "fp8_gemm_kernel", True),
    ("warp_specialization", "hopper_partial.cu", "tma_single_role_kernel", False),  # TMA and mbarriers, no setmaxnreg
    ("tma_tensor_descriptors", "tma_pipeline.cuh", "fp8_gemm_kernel", True),
    ("tma_tensor_descriptors", "hopper_partial.cu", "tma_single_role_kernel", True),
    ("tma_tensor_descriptors", "hopper_partial.cu", "cp_async_copy_kernel", False),
    ("fp8_block_scaling", "tma_pipeline.cuh", "fp8_gemm_kernel", True),
    ("fp8_block_scaling", "hopper_partial.cu", "fp8_cast_kernel", False),  # FP8 with one scale, nothing promoted
    ("persistent_tile_loop", "tma_pipeline.cuh", "fp8_gemm_kernel", True),
    ("persistent_tile_loop", "plain.cu", "grid_stride_copy", True),
    ("persistent_tile_loop", "hopper_partial.cu", "strided_device_loop", False),  # not a kernel
    ("persistent_tile_loop", "plain.cu", "scale_kernel", False),
    ("programmatic_dependent_launch", "tma_pipeline.cuh", "fp8_gemm_kernel", True),
    ("programmatic_dependent_launch", "plain.cu", "scale_kernel", False),
    ("release_gil_native_wait", "bind_release.cpp", None, True),
    ("release_gil_native_wait", "bind_release.cpp", "wait_stream", True),
    ("release_gil_native_wait", "bind_hold.cpp", None, False),
]


@pytest.mark.parametrize("pattern,file,fn,expected", HOPPER_CASES, ids=[f"{p}-{fn or file}-{e}" for p, file, fn, e in HOPPER_CASES])
def test_library_native_branches(pattern, file, fn, expected):
    entry = next(e for e in load_library() if e.id == pattern)
    if fn is None:
        facts = FileFacts(path=file, native=extract_native((NATIVE / file).read_bytes(), file))
    else:
        facts = native_fn(NATIVE / file, fn)
    assert evaluate(entry.pattern.present_when, Subject(facts, None)).ok is expected


# --------------------------------------------------------------------------------------
# Python: the foundation's extractor on the kernel part, host code read by the AST reader
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("rel", ["fixpkg/ops/kernels.py", "fixpkg/ops/launch.py", "fixpkg/ops/plain.py", "fixpkg/utils/op.py"])
def test_host_reader_matches_foundation_extractor(rel):
    text = (PKG / rel).read_text()
    ours, full = extract_python(text, rel).facts, extract_source(text, rel)
    assert [k.model_dump() for k in ours.kernels] == [k.model_dump() for k in full.kernels]
    key = lambda c: (c.line, c.name)  # noqa: E731
    assert sorted(ours.host_calls, key=key) == sorted(full.host_calls, key=key)
    assert sorted(ours.launches, key=lambda la: la.line) == sorted(full.launches, key=lambda la: la.line)
    assert ours.host_assigns == full.host_assigns and ours.host_functions == full.host_functions
    assert ours.imports == full.imports and ours.constants == full.constants


def test_slicing_keeps_lines():
    text = "import triton\n\n\ndef host():\n    return 1\n\n\n@triton.jit\ndef k(x):\n    pass\n"
    rec = extract_python(text, "m.py")
    assert rec.facts.kernels[0].line == 9 and rec.facts.lines == 11
    assert rec.facts.host_functions == ["host"] and [s.name for s in rec.symbols] == ["host", "k"]


@pytest.fixture
def linked():
    res = scan(resolve(str(PKG)), FactsCache(enabled=False), jobs=1)
    stats = link(res.records)
    facts = {r.path: r.py.facts for r in res.records if r.py is not None}
    return res, stats, facts


def test_cross_module_helper_is_inlined(linked):
    _, stats, facts = linked
    k = facts["fixpkg/ops/kernels.py"].kernel("decay_kernel")
    assert any(c.name == "tl.exp" and c.via == "exp" for c in k.calls)
    assert "exp" in k.helpers and stats["helpers_inlined"] >= 1
    assert holds({"calls": {"name": ["tl.exp"]}}, facts["fixpkg/ops/kernels.py"], "decay_kernel")
    assert not holds({"calls": {"name": ["tl.exp"]}}, facts["fixpkg/ops/plain.py"], "scale_kernel")


def test_module_alias_resolves_to_triton_name(linked):
    _, _, facts = linked
    f = facts["fixpkg/ops/kernels.py"]
    assert holds({"calls": {"name": ["tl.gather"]}}, f, "gather_kernel")
    assert f.kernel("desc_local_kernel").origins["desc"] == "tl.make_tensor_descriptor"


def test_descriptor_parameters(linked):
    _, stats, facts = linked
    f = facts["fixpkg/ops/kernels.py"]
    cond = {"memory_access": {"via": "tensor_descriptor"}}
    assert holds(cond, f, "desc_param_kernel") and holds(cond, f, "desc_local_kernel")
    assert not holds(cond, f, "decay_kernel") and not holds(cond, facts["fixpkg/ops/plain.py"], "scale_kernel")
    assert stats["descriptor_params"] == 2


def test_launch_in_another_file_is_attached(linked):
    _, stats, facts = linked
    f = facts["fixpkg/ops/kernels.py"]
    decay = f.kernel("decay_kernel").launches
    assert [(la.path, la.function, la.grid_dims) for la in decay] == [("fixpkg/ops/launch.py", "decay", 1)]
    assert [la.function for la in f.kernel("gather_kernel").launches] == ["gather_rows"]  # module.attr launch
    assert stats["launches_linked"] == 2
    assert holds({"launch": {"grid_dims": 1}}, f, "decay_kernel")
    assert not holds("launch", f, "desc_param_kernel")


def test_kernel_defined_through_a_wrapper_call(linked):
    _, _, facts = linked
    f = facts["fixpkg/ops/wrapped.py"]
    k = f.kernel("_copy")
    assert k is not None and k.line == 9 and k.jit_kwargs == {"do_not_specialize": "_SIZES"}
    assert [(la.kernel, la.function) for la in k.launches] == [("copy_kernel", "copy")]
    assert holds({"jit_option": {"name": "do_not_specialize"}}, f, "_copy")
    assert "copy" in f.host_functions and "_copy" not in f.host_functions


@pytest.mark.parametrize("cond,kernel,expected", [
    ({"jit_option": {"name": "do_not_specialize"}}, "decay_kernel", True),
    ({"jit_option": {"name": "do_not_specialize"}}, "gather_kernel", False),
    ({"loop": {"kind": ["tl.static_range"]}}, "gather_kernel", True),
    ({"loop": {"kind": ["tl.static_range"]}}, "decay_kernel", False),
    ({"heuristics": {"names": ["EVEN"]}}, "gather_kernel", True),
    ({"heuristics": {}}, "decay_kernel", False),
    ({"autotuned": {"min_configs": 2, "keyed": True}}, "desc_param_kernel", True),  # through a project wrapper
    ("autotuned", "decay_kernel", False),
])
def test_decorator_and_loop_facts(linked, cond, kernel, expected):
    _, _, facts = linked
    assert holds(cond, facts["fixpkg/ops/kernels.py"], kernel) is expected


# --------------------------------------------------------------------------------------
# sources, bad input, cache
# --------------------------------------------------------------------------------------


def make_wheel(dest: Path, name: str = "fixpkg", version: str = "0.1.0", extra: dict[str, bytes] | None = None) -> Path:
    path = dest / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        for f in sorted(PKG.rglob("*.py")):
            zf.write(f, f.relative_to(PKG).as_posix())
        for native in NATIVE.iterdir():
            zf.write(native, f"fixpkg/csrc/{native.name}")
        for rel, data in (extra or {}).items():
            zf.writestr(rel, data)
        info = f"{name}-{version}.dist-info"
        zf.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        zf.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        zf.writestr(f"{info}/RECORD", "")
    return path


def test_wheel_is_read_without_installing(tmp_path):
    whl = make_wheel(tmp_path, extra={"../evil.py": b"import triton\n", "fixpkg/vendored/cutlass/x.h": b"int x;"})
    src = resolve(str(whl))
    assert (src.project, src.version, src.kind) == ("fixpkg", "0.1.0", "wheel") and len(src.sha256) == 64
    res = scan(src, FactsCache(), jobs=1)
    assert res.skipped["path leaves the tree"] == 1 and res.ignored["vendored third-party code"] == 1
    paths = {r.path for r in res.records}
    assert "fixpkg/ops/kernels.py" in paths and "fixpkg/csrc/tma_pipeline.cuh" in paths and "fixpkg/host_only.py" not in paths


def test_bad_input_is_skipped_and_counted(tmp_path):
    root = tmp_path / "src"
    shutil.copytree(PKG, root)
    bad = root / "fixpkg" / "bad"
    bad.mkdir()
    (bad / "syntax.py").write_text("import triton\ndef broken(:\n")
    (bad / "latin1.py").write_bytes(b"import triton\n# caf\xe9\n")
    (bad / "binary.py").write_bytes(b"triton\0\0\0\x01")
    (bad / "huge.py").write_bytes(b"import triton\n" + b"x = 1\n" * 400_000)
    (bad / "kernel.cu").write_bytes(b"__global__ void k() {}\n\xff\xfe")
    outside = tmp_path / "outside.py"
    outside.write_text("import triton\n")
    (bad / "escape.py").symlink_to(outside)
    (bad / "loop").symlink_to(root)
    (tmp_path / "elsewhere").mkdir()
    (bad / "away").symlink_to(tmp_path / "elsewhere")
    res = scan(resolve(str(root)), FactsCache(), jobs=1)
    assert dict(res.skipped) == {
        "unparseable": 1, "not UTF-8": 2, "binary": 1, "larger than 2 MB": 1, "link leaves the tree": 2, "link to a folder": 1,
    }
    assert ("fixpkg/bad/escape.py", "link leaves the tree") in res.skipped_files
    assert {r.path for r in res.records} >= {"fixpkg/ops/kernels.py", "fixpkg/ops/plain.py"}


def test_cache_by_file_hash(tmp_path):
    whl = make_wheel(tmp_path)
    cache = FactsCache()
    first = scan(resolve(str(whl)), cache, jobs=1)
    assert first.extracted > 0 and first.cached == 0
    again = scan(resolve(str(whl)), FactsCache(), jobs=1)
    assert again.extracted == 0 and again.read == 0 and again.cached == first.extracted  # manifest: no decompression
    assert [r.model_dump() for r in again.records] == [r.model_dump() for r in first.records]
    nocache = scan(resolve(str(whl)), FactsCache(enabled=False), jobs=1)
    assert nocache.extracted == first.extracted


def test_rerun_over_unchanged_wheel_reuses_the_analysis(tmp_path):
    whl = make_wheel(tmp_path, name="sglang", version="0.0.1")
    lib = make_library(tmp_path)
    first = distill([str(whl)], load_library(lib), FactsCache(), jobs=1)
    again = distill([str(whl)], load_library(lib), FactsCache(), jobs=1)
    key = lambda h: (h.pattern, h.path, h.symbol, h.lines)  # noqa: E731
    assert sorted(map(key, again.detections.hits)) == sorted(map(key, first.detections.hits)) != []
    p1, p2 = first.report.projects[0], again.report.projects[0]
    assert p1.files_extracted == p1.files_scanned and p2.files_extracted == 0 and p2.files_cached == p1.files_scanned
    assert p2.detections == p1.detections and p2.file_sha256 == p1.file_sha256
    # a changed condition in the library invalidates the analysis, not the facts
    text = (lib / "desc_access" / "pattern.yaml").read_text().replace("via: tensor_descriptor", "via: block_ptr")
    (lib / "desc_access" / "pattern.yaml").write_text(text)
    third = distill([str(whl)], load_library(lib), FactsCache(), jobs=1)
    p3 = third.report.projects[0]
    assert p3.files_extracted == 0 and p3.files_cached == p1.files_scanned and "desc_access" not in p3.detections


def test_requirement_downloads_into_the_user_cache(tmp_path, monkeypatch):
    index = tmp_path / "index"
    index.mkdir()
    make_wheel(index)
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(index))
    src = resolve("fixpkg==0.1.0")
    assert Path(src.origin).parent == tmp_path / "cache" / "upstream" and src.version == "0.1.0"
    assert resolve("fixpkg==0.1.0").origin == src.origin  # second time: from the cache, no pip


def test_requirement_that_cannot_be_downloaded_is_one_line_exit_2(tmp_path, monkeypatch, capsys):
    from patterns.cli import main

    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path))
    with pytest.raises(SystemExit) as exc:
        main(["distill", "no-such-package-xyz==9.9.9", "--library", str(make_library(tmp_path)), "--drafts", str(tmp_path / "d")])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["error: cannot download 'no-such-package-xyz==9.9.9': No matching distribution found for no-such-package-xyz==9.9.9"]


def test_main_prints_one_line_error(tmp_path, capsys):
    from patterns.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["distill", str(tmp_path / "missing-folder" / "x"), "--library", str(make_library(tmp_path))])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and "no such folder or file" in err[0]


# --------------------------------------------------------------------------------------
# detection, evidence merge (--write), discovery
# --------------------------------------------------------------------------------------

PATTERN_TEMPLATE = """\
id: {id}
title: A pattern for the distiller tests
category: memory
status: preview
summary: A fixture pattern whose present_when the distiller runs upstream.
why: >-
  Written for the distiller's tests only. It has enough words to satisfy the
  schema's minimum length for the mechanism field of a pattern.
present_when:
{present_when}
applies_when:
  bottlenecks: [memory-bound]
resource_limits:
  notes: none
transformation:
  method: >-
    Nothing to transform: this pattern exists so the tests can check detection
    and the evidence merge.
safety: exact
evidence:
  upstream:
    # curated by hand; the distiller must keep this entry verbatim
    - project: sglang
      version: "0.5.0"
      path: sglang/some/file.py
      symbol: handpicked
      lines: [1, 2]
      note: >-
        folded note that must stay folded
  measured: []
tags: [test]
"""


def make_library(root: Path) -> Path:
    lib = root / "lib"
    for pid, cond in [
        ("desc_access", "  memory_access: {via: tensor_descriptor}"),
        ("tma_native", "  all:\n    - native_construct: {kinds: [tma_copy]}\n    - native_construct: {kinds: [mbarrier]}"),
        ("gil_held_wait", "  pybind_binding: {releases_gil: false, blocking: true}"),
    ]:
        (lib / pid).mkdir(parents=True)
        (lib / pid / "pattern.yaml").write_text(PATTERN_TEMPLATE.format(id=pid, present_when=cond))
    return lib


def make_upstream(root: Path) -> Path:
    """A folder that reads as project 'sglang' (its top-level package), built from the fixtures."""
    src = root / "up"
    shutil.copytree(PKG / "fixpkg", src / "sglang")
    shutil.copytree(NATIVE, src / "sglang" / "csrc")
    for f in (src / "sglang").rglob("*.py"):
        f.write_text(f.read_text().replace("fixpkg", "sglang"))
    return src


def test_detection_locations(tmp_path):
    lib = make_library(tmp_path)
    result = distill([str(make_upstream(tmp_path))], load_library(lib), FactsCache(), jobs=1)
    got = sorted((h.pattern, h.path, h.symbol) for h in result.detections.hits)
    assert got == [
        ("desc_access", "sglang/ops/kernels.py", "desc_local_kernel"),
        ("desc_access", "sglang/ops/kernels.py", "desc_param_kernel"),
        ("gil_held_wait", "sglang/csrc/bind_hold.cpp", "PYBIND11_MODULE"),
        ("tma_native", "sglang/csrc/hopper_partial.cu", "tma_single_role_kernel"),
        ("tma_native", "sglang/csrc/tma_pipeline.cuh", "fp8_gemm_kernel"),
    ]
    p = result.report.projects[0]
    assert (p.project, p.version) == ("sglang", "local")
    assert p.detections == {"desc_access": 2, "gil_held_wait": 1, "tma_native": 2}
    assert p.file_sha256["sglang/ops/kernels.py"] and p.kernels == 7 and p.bindings == 6


def test_write_merges_evidence_and_keeps_curated_entries(tmp_path):
    lib = make_library(tmp_path)
    up = make_upstream(tmp_path)
    before = {p: p.read_text() for p in lib.rglob("pattern.yaml")}
    r = runner.invoke(app, ["distill", str(up), "--library", str(lib), "--drafts", str(tmp_path / "d"), "--no-llm"])
    assert r.exit_code == 0, r.output
    assert "+    - project: sglang" in r.output and "would change" in r.output
    assert {p: p.read_text() for p in lib.rglob("pattern.yaml")} == before  # nothing written without --write
    r = runner.invoke(app, ["distill", str(up), "--library", str(lib), "--drafts", str(tmp_path / "d"), "--write", "--format", "json"])
    assert r.exit_code == 0, r.output
    text = (lib / "desc_access" / "pattern.yaml").read_text()
    assert "    # curated by hand; the distiller must keep this entry verbatim\n" in text
    assert "      note: >-\n        folded note that must stay folded\n" in text
    pattern = Pattern.model_validate(yaml.safe_load(text))
    found = [u for u in pattern.evidence.upstream if u.note.startswith("found by distill")]
    assert {u.symbol for u in found} == {"desc_local_kernel", "desc_param_kernel"}
    assert all(len(u.sha256) == 64 and u.version == "local" for u in found)
    assert text.index("measured: []") > text.index("desc_param_kernel")  # key order kept
    # a rerun changes nothing: distiller entries are replaced, not appended
    r = runner.invoke(app, ["distill", str(up), "--library", str(lib), "--drafts", str(tmp_path / "d"), "--write"])
    assert "already up to date" in r.output and (lib / "desc_access" / "pattern.yaml").read_text() == text


def test_merge_handles_dumper_style_lists(tmp_path):
    """`yaml.safe_dump` style: list items at the key's indent, `lines` as a nested block list."""
    from patterns.distill.merge import plan

    lib = make_library(tmp_path)
    path = lib / "desc_access" / "pattern.yaml"
    data = yaml.safe_load(path.read_text())
    data["evidence"]["upstream"].append({"project": "fla", "version": "0.6.0", "path": "fla/x.py", "symbol": "k",
                                         "lines": [3, 4], "note": "a long note " * 12})
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    original = path.read_text()
    result = distill([str(make_upstream(tmp_path))], load_library(lib), FactsCache(), jobs=1)
    [change] = [c for c in plan(load_library(lib), result.detections, {"sglang": "local"}) if c.entry.id == "desc_access"]
    kept = original[original.index("  upstream:\n"):original.index("  measured:")]
    assert kept in change.new  # the curated items, nested `- 3` / `- 4` included, verbatim
    got = Pattern.model_validate(yaml.safe_load(change.new)).evidence.upstream
    assert [u.symbol for u in got][:2] == ["handpicked", "k"]
    assert {u.symbol for u in got[2:]} == {"desc_local_kernel", "desc_param_kernel"}


def test_cap_limits_written_entries_not_counts(tmp_path):
    lib = make_library(tmp_path)
    result = distill([str(make_upstream(tmp_path))], load_library(lib), FactsCache(), jobs=1, cap=1)
    from patterns.distill.merge import plan

    changes = plan(load_library(lib), result.detections, {"sglang": "local"}, cap=1)
    desc = next(c for c in changes if c.entry.id == "desc_access")
    assert desc.added == 1 and result.report.projects[0].detections["desc_access"] == 2


def make_cluster_tree(root: Path, n: int = 5) -> Path:
    src = root / "cl" / "sglang"
    src.mkdir(parents=True)
    for i in range(n):
        (src / f"k{i}.py").write_text(textwrap.dedent(f"""\
            import triton
            import triton.language as tl


            @triton.jit
            def hist_kernel_{i}(x, out, n, BLOCK: tl.constexpr):
                pid = tl.program_id(0)
                offs = pid * BLOCK + tl.arange(0, BLOCK)
                v = tl.load(x + offs, mask=offs < n)
                c = tl.cumsum(v, 0)
                tl.atomic_add(out + offs, c, mask=offs < n)
            """))
    (src / "other.py").write_text("import triton\nimport triton.language as tl\n\n\n@triton.jit\ndef plain(x):\n    tl.store(x, tl.load(x))\n")
    return root / "cl"


def test_planted_technique_yields_exactly_one_draft_with_its_locations(tmp_path):
    """tl.cumsum is planted in five files and absent from another: one draft, those five kernels, nothing else."""
    lib = make_library(tmp_path)
    result = distill([str(make_cluster_tree(tmp_path))], load_library(lib), FactsCache(), jobs=1)
    assert [d.id for d in result.drafts] == ["in_kernel_prefix_sum"]
    d = result.drafts[0]
    assert sorted((u.path, u.symbol) for u in d.evidence.upstream) == [(f"sglang/k{i}.py", f"hist_kernel_{i}") for i in range(5)]
    assert all(u.lines == (5, 11) and u.project == "sglang" and len(u.sha256) == 64 for u in d.evidence.upstream)
    assert "`" not in d.evidence.upstream[0].note and "line 10" in d.evidence.upstream[0].note  # described, not quoted
    assert d.support == {"sglang": 5} and d.contrast == {"share": round(5 / 6, 4), "subjects": 6, "held": 5}
    assert d.status.value == "draft" and d.category.value == "compute" and d.safety.value == "exact"
    # complete except prose: the named prose fields are all that keeps it from being a Pattern
    assert d.missing() == ["summary", "transformation", "why"]
    assert d.applies_when.bottlenecks[0].value == "memory-bound" and "estimated by the distiller" in d.resource_limits.notes
    [path] = write_drafts(result.drafts, tmp_path / "drafts")
    assert path == tmp_path / "drafts" / "in_kernel_prefix_sum" / "pattern.yaml"
    again = Draft.model_validate(yaml.safe_load(path.read_text()))
    assert again.present_when.to_yaml() == d.present_when.to_yaml() == {"calls": {"name": ["tl.cumsum"]}}
    for rec in result.scans[0].records:  # present_when holds on every location and nowhere else
        for k in rec.py.facts.kernels:
            assert evaluate(again.present_when, Subject(rec.py.facts, k)).ok == k.name.startswith("hist_kernel_")
    why = {c.id: c.dropped for c in result.report.candidates}
    assert why["in_kernel_prefix_sum"] == "" and why["in_kernel_histogram"] == "support 0 < 3"


HOST_DISPATCH = """\
# no triton here: the launchers are chosen by a table and registered as torch ops
import torch

from sglang.ops import kernels


def _fwd_small(x):
    return kernels.small(x)


def _fwd_large(x):
    return kernels.large(x)


FORWARD = {
    "small": _fwd_small,
    "large": _fwd_large,
}


@torch.library.custom_op("fix::fwd", mutates_args=())
def fwd(x: torch.Tensor) -> torch.Tensor:
    return FORWARD["small" if x.numel() < 4096 else "large"](x)
"""


def test_host_file_without_triton_is_mined(tmp_path):
    """A dispatch table and a registering decorator, in a file that never imports triton, are read and mined."""
    from patterns.distill import discover
    from patterns.distill.run import _reader

    root = make_upstream(tmp_path)
    (root / "sglang" / "dispatch.py").write_text(HOST_DISPATCH)
    src = resolve(str(root))
    res = scan(src, FactsCache(), jobs=1)
    assert "sglang/dispatch.py" in {r.path for r in res.records} and "sglang/host_only.py" not in {r.path for r in res.records}
    m = discover.mine(src.project, src.version, res.records)
    discover.locate(m, _reader(src))
    [table] = [loc for loc in m.hits["function_dispatch_table"] if loc.path == "sglang/dispatch.py"]
    assert (table.symbol, table.lines) == ("<module>", (15, 18))
    [op] = [loc for loc in m.hits["custom_op_registration"] if loc.path == "sglang/dispatch.py"]
    assert op.symbol == "fwd" and op.lines == (21, 23)


# --------------------------------------------------------------------------------------
# LLM: a local OpenAI-compatible server with canned answers
# --------------------------------------------------------------------------------------

VALID = json.dumps({
    "summary": "Accumulate a running prefix with tl.cumsum and publish it with atomics.",
    "transformation": "Replace the serial loop over the block by one tl.cumsum over the loaded block, then store the prefix.",
    "why": "Each program reads BLOCK values once and writes BLOCK partial sums; the atomic add merges "
           "programs without a second pass over memory, so traffic is one read and one write per element.",
    "applicability": "Histogram-like kernels whose programs contribute to shared outputs.",
    "bottlenecks": ["memory-bound"],
    "traps": [{"fact": "Atomic order is not deterministic.", "why": "fp32 addition is not associative.",
               "how": "Accept the tolerance or use a two-pass reduction."}],
})


def run_llm(tmp_path, monkeypatch, answers):
    lib = make_library(tmp_path)
    tree = make_cluster_tree(tmp_path)
    with serve(answers) as stub:
        monkeypatch.setenv("PATTERNS_LLM_BASE_URL", stub.base_url)
        monkeypatch.setenv("PATTERNS_LLM_MODEL", "stub-model")
        monkeypatch.setenv("PATTERNS_LLM_API_KEY", "test-key")
        r = runner.invoke(app, ["distill", str(tree), "--library", str(lib), "--drafts", str(tmp_path / "drafts"), "--format", "json"])
        requests = list(stub.requests)
    assert r.exit_code == 0, r.output
    report = json.loads(r.stdout[r.stdout.index("{"):])
    draft = Draft.model_validate(yaml.safe_load((tmp_path / "drafts" / "in_kernel_prefix_sum" / "pattern.yaml").read_text()))
    return report, draft, requests, r


def test_llm_fills_draft_prose(tmp_path, monkeypatch):
    report, draft, requests, _ = run_llm(tmp_path, monkeypatch, [VALID])
    assert report["drafts"][0]["llm"] == "filled"
    assert draft.summary.startswith("Accumulate") and draft.applies_when.bottlenecks[0].value == "memory-bound"
    assert draft.traps[0].fact == "Atomic order is not deterministic."
    assert draft.transformation.method.startswith("Replace the serial loop") and draft.missing() == []  # schema-valid as a Pattern
    body = requests[0]
    assert body["model"] == "stub-model" and body["response_format"]["type"] == "json_schema"
    assert "tl.cumsum" in body["messages"][1]["content"]  # the code excerpt went into the prompt


@pytest.mark.parametrize("answer,reason", [
    (json.dumps({**json.loads(VALID), "summary": "too short"}), "schema: summary: String should have at least 20 characters"),
    ("not json at all", "answer is not JSON"),
    (json.dumps({**json.loads(VALID), "why": "Run this first:\n```\nimport os; os.system('rm -rf /')\n``` " + "x" * 80}), "why: looks like code or markup"),
    (json.dumps({**json.loads(VALID), "applicability": "See https://evil.example.com/payload for the details."}), "applicability: URL not in the allow-list"),
    (json.dumps({**json.loads(VALID), "extra": "field"}), "schema: extra: Extra inputs are not permitted"),
    (Error(500, "overloaded"), "endpoint error"),
], ids=["schema-length", "not-json", "code-block", "url", "extra-field", "http-500"])
def test_llm_invalid_or_unsafe_answer_is_rejected(tmp_path, monkeypatch, answer, reason):
    report, draft, _, r = run_llm(tmp_path, monkeypatch, [answer])
    status = report["drafts"][0]["llm"]
    assert status.startswith("rejected: ") and reason in status
    assert draft.summary == "" and draft.signature == ["calls(name=['tl.cumsum'])"]  # mechanical fields kept
    assert draft.missing() == ["summary", "transformation", "why"]
    assert "LLM answer rejected" in r.stderr


def test_without_endpoint_drafts_keep_mechanical_fields(tmp_path):
    lib = make_library(tmp_path)
    r = runner.invoke(app, ["distill", str(make_cluster_tree(tmp_path)), "--library", str(lib), "--drafts", str(tmp_path / "drafts"), "--format", "json"])
    assert r.exit_code == 0, r.output
    report = json.loads(r.stdout[r.stdout.index("{"):])
    assert report["drafts"][0]["llm"] == "not configured"
    assert report["projects"][0]["skipped"] == {} and report["projects"][0]["kernels"] == 6


def test_llm_config_file(tmp_path, monkeypatch):
    from patterns.distill.llm import load_config

    assert load_config() is None
    cfg = tmp_path / "config" / "patterns" / "config.toml"
    cfg.parent.mkdir(parents=True)
    cfg.write_text('[llm]\nbase_url = "http://127.0.0.1:9/v1/"\nmodel = "m"\napi_key_env = "MY_KEY"\n')
    monkeypatch.setenv("MY_KEY", "secret")
    c = load_config()
    assert (c.base_url, c.model, c.api_key) == ("http://127.0.0.1:9/v1", "m", "secret")


def test_detections_table_counts_per_pattern_and_project():
    data = {
        "per_project": {
            "fla": {"version": "0.6.0", "detections": {"online_softmax": 2}},
            "sglang": {"version": "0.5.23", "detections": {"online_softmax": 1, "warp_specialization": 3}},
            "deepgemm": {"version": "0.2.5", "detections": {"warp_specialization": 4}},
        },
        "native_hits": {"warp_specialization/sglang": 2, "warp_specialization/deepgemm": 4},
        "patterns": ["warp_specialization", "online_softmax", "welford_reduction"],
    }
    assert detections_table(data).splitlines() == [
        "| pattern | sglang 0.5.23 | fla-core 0.6.0 | sgl-deep-gemm 0.2.5 |",
        "|---|---:|---:|---:|",
        "| online_softmax | 1 | 2 | 0 |",
        "| warp_specialization | 3 (2 C++/CUDA) | 0 | 4 (4 C++/CUDA) |",
        "| welford_reduction | 0 | 0 | 0 |",
        "| **all patterns** | 4 | 2 | 4 |",
    ]


# --------------------------------------------------------------------------------------
# bad input: one line, exit 2
# --------------------------------------------------------------------------------------


def one_line_exit_2(capsys, argv: list[str]) -> str:
    from patterns.cli import main

    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: "), err
    return err[0]


def test_wheel_that_is_not_a_zip(tmp_path, capsys):
    bad = tmp_path / "fake-1.0-py3-none-any.whl"
    bad.write_bytes(b"this is not a zip archive")
    line = one_line_exit_2(capsys, ["distill", str(bad), "--library", str(make_library(tmp_path)), "--drafts", str(tmp_path / "d")])
    assert str(bad) in line and "not a readable wheel" in line


def test_tree_with_an_unreadable_file(tmp_path, capsys):
    root = make_upstream(tmp_path)
    (root / "sglang" / "gone.py").symlink_to(root / "sglang" / "deleted.py")  # inside the tree, but nothing there
    line = one_line_exit_2(capsys, ["distill", str(root), "--library", str(make_library(tmp_path)), "--drafts", str(tmp_path / "d")])
    assert "gone.py: cannot read" in line


@pytest.mark.parametrize("spec", ["no_such_tree/", "./DeepEP", "missing-1.0-py3-none-any.whl"])
def test_missing_local_path_is_not_sent_to_pip(tmp_path, capsys, monkeypatch, spec):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    line = one_line_exit_2(capsys, ["distill", spec, "--library", str(make_library(tmp_path)), "--drafts", str(tmp_path / "d")])
    assert line == f"error: {spec}: no such folder or file"
    assert not (tmp_path / "cache" / "upstream").exists()  # pip never ran


def test_pip_download_takes_wheels_only(tmp_path, monkeypatch):
    """With only an sdist on the index, the download fails: pip is never asked to build upstream code."""
    import tarfile

    from patterns.distill.errors import DistillError

    index = tmp_path / "index"
    index.mkdir()
    with tarfile.open(index / "fixsdist-0.1.0.tar.gz", "w:gz") as tf:
        setup = tmp_path / "setup.py"
        setup.write_text("raise SystemExit('the build backend ran')\n")
        tf.add(setup, "fixsdist-0.1.0/setup.py")
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(index))
    with pytest.raises(DistillError) as exc:
        resolve("fixsdist==0.1.0")
    assert "No matching distribution found" in str(exc.value) and "backend" not in str(exc.value)


def test_missing_draft_id(tmp_path, capsys):
    for verb in ("show", "promote"):
        line = one_line_exit_2(capsys, ["drafts", verb, "no_such_draft", "--drafts", str(tmp_path / "d")])
        assert line.startswith("error: draft 'no_such_draft': no ") and "holds no drafts" in line


# --------------------------------------------------------------------------------------
# review path: drafts list / show / promote
# --------------------------------------------------------------------------------------

PREFIX_BEFORE = '''\
import torch
import triton
import triton.language as tl


@triton.jit
def prefix_kernel(x, y, N, BN: tl.constexpr):
    acc = 0.0
    for i in range(0, N):
        acc += tl.load(x + i)
        tl.store(y + i, acc)


def prefix(x):
    y = torch.empty_like(x)
    prefix_kernel[(1,)](x, y, x.numel(), BN=triton.next_power_of_2(x.numel()))
    return y
'''

PREFIX_AFTER = '''\
import torch
import triton
import triton.language as tl


@triton.jit
def prefix_kernel(x, y, N, BN: tl.constexpr):
    o = tl.arange(0, BN)
    v = tl.load(x + o, mask=o < N, other=0.0)
    tl.store(y + o, tl.cumsum(v, 0), mask=o < N)


def prefix(x):
    y = torch.empty_like(x)
    prefix_kernel[(1,)](x, y, x.numel(), BN=triton.next_power_of_2(x.numel()))
    return y
'''

PREFIX_REFERENCE = '''\
import torch


def make_inputs(shape: dict, seed: int, device: str = "cpu") -> dict:
    g = torch.Generator().manual_seed(seed)
    return {"x": torch.randn(shape["N"], generator=g).to(device)}


def reference(x):
    return torch.cumsum(x.double(), 0).float()
'''

PROSE = {
    "summary": "Compute a block's running sum with one tl.cumsum instead of a serial loop.",
    "why": "The serial loop issues N dependent loads and stores from one thread of work; a block-wide scan reads "
           "N elements once and writes N, in log2(N) parallel steps instead of N sequential ones.",
    "transformation": {"method": "Load the whole block with a mask, replace the loop by tl.cumsum over axis 0, store once."},
}


def test_drafts_review_path(tmp_path, capsys):
    """Drafts go to --drafts (never the cwd), are listed and shown, and reach the library only when complete."""
    lib = make_library(tmp_path)
    drafts = tmp_path / "drafts"
    r = runner.invoke(app, ["distill", str(make_cluster_tree(tmp_path)), "--library", str(lib), "--drafts", str(drafts), "--no-llm"])
    assert r.exit_code == 0, r.output
    listed = json.loads(runner.invoke(app, ["drafts", "list", "--drafts", str(drafts), "--format", "json"]).stdout)
    assert [(x["id"], x["locations"], x["missing"]) for x in listed] == [("in_kernel_prefix_sum", 5, ["summary", "transformation", "why"])]
    shown = runner.invoke(app, ["drafts", "show", "in_kernel_prefix_sum", "--drafts", str(drafts)])
    assert shown.exit_code == 0 and "hist_kernel_0" in shown.stdout and "missing for the library: summary" in shown.stderr
    # not ready: prose missing, then examples missing; the library is untouched
    argv = ["drafts", "promote", "in_kernel_prefix_sum", "--drafts", str(drafts), "--library", str(lib)]
    assert "not ready: write summary, transformation, why" in one_line_exit_2(capsys, argv)
    path = drafts / "in_kernel_prefix_sum" / "pattern.yaml"
    data = yaml.safe_load(path.read_text())
    data.update(PROSE)
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    assert "not ready: add runnable before.py, after.py, reference.py" in one_line_exit_2(capsys, argv)
    for name, text in (("before.py", PREFIX_BEFORE), ("after.py", PREFIX_BEFORE), ("reference.py", PREFIX_REFERENCE)):
        (path.parent / name).write_text(text)
    data["example"] = {"entry": "prefix", "kernel": "prefix_kernel", "shapes": [{"N": 7}, {"N": 33}], "seeds": [0], "atol": 1e-4, "rtol": 1e-4}
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    # after.py still lacks the technique: the check of `patterns check --run` refuses it
    assert "check failed: " in one_line_exit_2(capsys, argv) and not (lib / "in_kernel_prefix_sum").exists()
    assert "in_kernel_prefix_sum" not in {e.id for e in load_library(lib)}  # never reaches suggest before promotion
    (path.parent / "after.py").write_text(PREFIX_AFTER)
    r = runner.invoke(app, argv)
    assert r.exit_code == 0, r.output
    assert (lib / "in_kernel_prefix_sum" / "after.py").exists() and not path.parent.exists()
    entry = next(e for e in load_library(lib) if e.id == "in_kernel_prefix_sum")
    assert entry.pattern.status.value == "preview" and len(entry.pattern.evidence.upstream) == 5


def test_drafts_default_to_the_user_data_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.delenv("PATTERNS_DRAFTS_DIR", raising=False)
    r = runner.invoke(app, ["distill", str(make_cluster_tree(tmp_path)), "--library", str(make_library(tmp_path)), "--no-llm"])
    assert r.exit_code == 0, r.output
    assert (tmp_path / "data" / "patterns" / "drafts" / "in_kernel_prefix_sum" / "pattern.yaml").exists()
    assert not (tmp_path / "drafts").exists()


def test_audit_samples_every_pattern_before_repeating_one(tmp_path, capsys):
    from patterns.distill.audit import main as audit_main

    root = make_upstream(tmp_path)
    tree = make_cluster_tree(tmp_path)
    for f in (tree / "sglang").iterdir():
        shutil.copy(f, root / "sglang" / f.name)
    audit_main([str(root), "--library", str(make_library(tmp_path)), "--sample", "3", "--seed", "1", "--jobs", "1", "--format", "json"])
    items = json.loads(capsys.readouterr().out)
    assert len(items) == 3 and len({(i["source"], i["pattern"]) for i in items}) == 3  # three different patterns/drafts
    draft = next(i for i in items if i["source"] == "draft")
    assert draft["pattern"] == "in_kernel_prefix_sum" and ">" in draft["code"] and "tl.cumsum" in draft["code"]


def test_a_technique_the_library_names_is_not_proposed(tmp_path):
    """Fewer shared locations than the Jaccard rule needs, but the same technique by name: no draft."""
    lib = make_library(tmp_path)
    (lib / "prefix_sum_rows").mkdir()
    (lib / "prefix_sum_rows" / "pattern.yaml").write_text(PATTERN_TEMPLATE.format(
        id="prefix_sum_rows", present_when="  kernel_named: {names: ['hist_kernel_[01]$']}"))
    result = distill([str(make_cluster_tree(tmp_path))], load_library(lib), FactsCache(), jobs=1)
    assert result.drafts == []
    why = {c.id: c.dropped for c in result.report.candidates}
    assert why["in_kernel_prefix_sum"].startswith("the library has it: prefix_sum_rows names the same technique")


def test_short_circuit_check_gives_evaluates_verdict():
    """detect.check (all/any stopped early, children reordered by cost, one predicate memo per subject
    shared by every condition) returns exactly evaluate()'s verdict: on every kernel and file of the
    library's own before/after examples and the fixtures, for every library pattern and technique."""
    from patterns.distill.detect import check
    from patterns.distill.techniques import TECHNIQUES

    conds = [e.pattern.present_when for e in load_library()] + [Condition.model_validate(t.when) for t in TECHNIQUES]
    lib = Path(__file__).parents[1] / "patterns" / "library"
    files = sorted(lib.glob("*/before.py")) + sorted(lib.glob("*/after.py"))
    files += sorted(PKG.rglob("*.py"))
    subjects = []
    for f in files:
        facts = extract_source(f.read_text(encoding="utf-8"), str(f))
        subjects += [Subject(facts, k) for k in facts.kernels] + [Subject(facts, None)]
    for f in sorted(NATIVE.iterdir()):
        nat = extract_native(f.read_bytes(), f.name)
        subjects.append(Subject(FileFacts(path=f.name, native=nat), None))
    held = 0
    for _ in range(2):  # the second pass runs with the children in the order the first one measured
        for s in subjects:
            memo: dict = {}
            for c in conds:
                want = evaluate(c, s)
                got = check(c, s, memo)
                if want.ok:
                    held += 1
                    assert got == want, (c.describe(), s.file.path, s.kernel and s.kernel.name)
                else:
                    assert not got.ok, (c.describe(), s.file.path, s.kernel and s.kernel.name)
    assert len(subjects) > 150 and held > 500
