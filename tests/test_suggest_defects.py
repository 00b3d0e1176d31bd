"""Regression tests for the defects found running `suggest` on real kernels (issue #15).

Each test names the defect it pins; the kernels are small but written the way
the published kernels of the corpus are (launchers that unpack `.shape`,
helpers, aliases), not the library's own examples.
"""
from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest

from patterns.core.facts import extract_source
from patterns.core.hardware import gpu
from patterns.core.schema import BottleneckClass
from patterns.retriever.estimate import estimate

H200 = gpu("h200")


def _src(text: str) -> str:
    return textwrap.dedent(text).lstrip()


# --------------------------------------------------------------------------------------
# units: ncu's automatic units and torch.profiler's strings
# --------------------------------------------------------------------------------------

NCU_MS = '''"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","gpu__time_duration.sum","dram__throughput.avg.pct_of_peak_sustained_elapsed","sm__throughput.avg.pct_of_peak_sustained_elapsed","launch__grid_size","launch__waves_per_multiprocessor"
"","","","","","","","","","","","msecond","%","%","",""
"0","1","python","h","matmul_kernel","1","7","(256, 1, 1)","(1024, 1, 1)","0","9.0","4.02","31.5","88.1","1,024","1.94"
'''


def test_ncu_msecond_duration_is_milliseconds(tmp_path):
    """A 4 ms GEMM exported with ncu's automatic units was read as 4 µs and called launch-bound."""
    from patterns.retriever.profile import load_profile

    p = tmp_path / "gemm.csv"
    p.write_text(NCU_MS)
    bs = load_profile(p, "matmul_kernel")
    assert bs[0].numbers["duration_us"] == pytest.approx(4020.0)
    assert [b.cls for b in bs] == [BottleneckClass.compute]


@pytest.mark.parametrize("value,unit,base,kind", [
    (2350, "nsecond", 2.35e-6, "time"), (3, "usecond", 3e-6, "time"), (4.02, "msecond", 4.02e-3, "time"),
    (1.5, "second", 1.5, "time"), (2, "Gbyte", 2e9, "data"), (512, "Kbyte", 512e3, "data"), (3, "Mbyte", 3e6, "data"),
    (3.3, "Tbyte/second", 3.3e12, "rate"), (900, "Gbyte/second", 9e11, "rate"), (87.5, "%", 87.5, "percent"),
    (5, "Kcycle", 5000, "count"), (1.98, "cycle/nsecond", 1.98e9, "rate"), (2, "MiB", 2 * 1024**2, "data"),
])
def test_every_ncu_unit_converts(value, unit, base, kind):
    from patterns.retriever.units import convert

    v, k = convert(value, unit)
    assert k == kind and v == pytest.approx(base)


def test_torch_profiler_quantities():
    from patterns.retriever.units import UnitError, parse_quantity

    assert parse_quantity("4.123ms")[0] == pytest.approx(4.123e-3)
    assert parse_quantity("812.000us")[0] == pytest.approx(812e-6)
    assert parse_quantity("2.5 GB/s") == (pytest.approx(2.5e9), "rate")
    assert parse_quantity("1,024 KB") == (pytest.approx(1.024e6), "data")
    with pytest.raises(UnitError, match="furlong"):
        parse_quantity("3 furlong")


def test_unknown_ncu_unit_is_a_one_line_error(tmp_path):
    from patterns.retriever.profile import ProfileError, load_profile

    p = tmp_path / "odd.csv"
    p.write_text(NCU_MS.replace("msecond", "fortnight"))
    with pytest.raises(ProfileError, match=r"odd.csv: column 'gpu__time_duration.sum': unknown unit 'fortnight'"):
        load_profile(p, "matmul_kernel")


# captured on an H200 by evidence/gpu/ncu-rep/run.sh: the project's Triton matmul at 4096^3 bf16, three
# launches, ncu's SpeedOfLight/LaunchStats/Occupancy sections; matmul.csv is its `--page raw` export
NCU_REP = Path(os.environ.get("PATTERNS_NCU_REP") or Path(__file__).parents[1] / "evidence" / "gpu" / "ncu-rep" / "matmul.ncu-rep")


def test_binary_ncu_report_is_read():
    """A report from a GPU host, read on this CPU-only machine: the same numbers as ncu's own CSV export
    of it (the SpeedOfLight section names DRAM throughput gpu__dram_throughput, which is read too)."""
    pytest.importorskip("ncu_report")
    from patterns.retriever.profile import load_profile

    binary = load_profile(NCU_REP, "matmul_fwd_kernel")
    exported = load_profile(NCU_REP.with_suffix(".csv"), "matmul_fwd_kernel")
    assert [b.cls for b in binary] == [b.cls for b in exported]
    for b, e in zip(binary, exported):  # the CSV prints values to about six digits
        assert b.numbers.keys() == e.numbers.keys() and all(b.numbers[k] == pytest.approx(e.numbers[k], rel=1e-3) for k in b.numbers)
    nums = binary[0].numbers
    assert binary[0].source == "ncu" and nums["launches"] == 3 and nums["programs"] == 1024
    assert 300 < nums["duration_us"] < 600 and nums["sm_pct_of_peak"] > nums["dram_pct_of_peak"] > 0
    assert BottleneckClass.compute in {b.cls for b in binary}


def test_ncu_rep_without_the_package_says_how_to_get_it(tmp_path, monkeypatch):
    import sys

    from patterns.retriever.profile import ProfileError, load_profile

    monkeypatch.setitem(sys.modules, "ncu_report", None)
    p = tmp_path / "k.ncu-rep"
    p.write_bytes(b"\x00NVPROF")
    with pytest.raises(ProfileError, match=r"k.ncu-rep: reading .ncu-rep needs NVIDIA's ncu-report package"):
        load_profile(p, "k")


# --------------------------------------------------------------------------------------
# register pressure of 1-D blocks
# --------------------------------------------------------------------------------------

ONE_D = _src('''
    import torch
    import triton
    import triton.language as tl


    @triton.jit
    def scale_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        offs = pid * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask)
        tl.store(y_ptr + offs, x * 2.0, mask=mask)


    def scale(x, BLOCK=65536):
        y = torch.empty_like(x)
        n = x.numel()
        scale_kernel[(triton.cdiv(n, BLOCK),)](x, y, n, BLOCK=BLOCK, num_warps=4)
        return y
''')


def test_one_d_block_register_pressure():
    """BLOCK=65536 at 4 warps is 512 fp32 values per thread for one tensor, not 32 registers."""
    f = extract_source(ONE_D, "scale.py")
    a = estimate(f, f.kernels[0], H200, {"n": 1 << 26, "BLOCK": 65536})
    assert a.numbers["regs_per_thread_est"] == 255
    spill = next(b for b in [a.primary, *a.others] if "registers/thread" in " ".join(b.rationale))
    assert spill.cls == BottleneckClass.occupancy and "65536 elements over 128 threads" in spill.rationale[0]
    small = estimate(f, f.kernels[0], H200, {"n": 1 << 26, "BLOCK": 1024})
    assert small.numbers["regs_per_thread_est"] == 32 + 1024 // 128


# --------------------------------------------------------------------------------------
# sizing from input tensors, names, the bounded evaluator
# --------------------------------------------------------------------------------------

GEMM = _src('''
    import torch
    import triton
    import triton.language as tl


    @triton.jit
    def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
        pid = tl.program_id(0)
        num_pid_m = tl.cdiv(M, BLOCK_M)
        num_pid_n = tl.cdiv(N, BLOCK_N)
        ORDER
        offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        offs_k = tl.arange(0, BLOCK_K)
        a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
        b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k in range(0, tl.cdiv(K, BLOCK_K)):
            a = tl.load(a_ptrs)
            b = tl.load(b_ptrs)
            acc += tl.dot(a, b)
            a_ptrs += BLOCK_K * stride_ak
            b_ptrs += BLOCK_K * stride_bk
        c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
        tl.store(c_ptrs, acc.to(tl.bfloat16))


    def matmul(a, b):
        M, K = a.shape
        K, N = b.shape
        c = torch.empty((M, N), device=a.device, dtype=a.dtype)
        grid = (triton.cdiv(M, 128) * triton.cdiv(N, 128),)
        matmul_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
                            BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_M=8, num_warps=8)
        return c
''')
ROW_MAJOR = "pid_m = pid // num_pid_n\n    pid_n = pid % num_pid_n"
GROUPED = ("num_pid_in_group = GROUP_M * num_pid_n\n    group_id = pid // num_pid_in_group\n    first_pid_m = group_id * GROUP_M\n"
           "    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)\n    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)\n"
           "    pid_n = (pid % num_pid_in_group) // group_size_m")


def _gemm(order: str):
    return extract_source(GEMM.replace("ORDER", order), "gemm.py")


def _inputs(n: int):
    from patterns.retriever.launcher import parse_inputs

    return parse_inputs([f"a={n}x{n}:bf16", f"b={n}x{n}:bf16"])


def test_inputs_size_the_launch_through_shape_unpacking_and_strides():
    f = _gemm(ROW_MAJOR)
    a = estimate(f, f.kernels[0], H200, {}, inputs=_inputs(4096))
    assert a.numbers["programs"] == 32 * 32
    # tile loads without reuse: 1024 programs x 64 k-steps x (128x64 + 64x128) bf16
    assert a.numbers["bytes_without_l2_reuse"] == 1024 * 64 * (2 * 128 * 64) * 2
    assert a.numbers["dot_flops"] == 2 * 4096**3


def test_gemm_4096_is_compute_bound_through_l2_reuse():
    """The 4096³ bf16 GEMM was "memory-bound, 2.2 GB": tile reuse through L2 makes it compute-bound."""
    f = _gemm(ROW_MAJOR)
    a = estimate(f, f.kernels[0], H200, {}, inputs=_inputs(4096))
    assert a.primary.cls == BottleneckClass.compute
    assert a.numbers["bytes"] < 0.25e9 < a.numbers["bytes_without_l2_reuse"]
    assert "L2 reuse (row-major" in a.primary.rationale[0]


def test_grouped_ordering_changes_the_estimate():
    """After the grouped-ordering rewrite the estimate moves, and by what the row-major run predicted."""
    row, grp = _gemm(ROW_MAJOR), _gemm(GROUPED)
    before = estimate(row, row.kernels[0], H200, {}, inputs=_inputs(8192))
    after = estimate(grp, grp.kernels[0], H200, {}, inputs=_inputs(8192))
    assert after.numbers["bytes"] < 0.75 * before.numbers["bytes"]
    assert before.numbers["bytes_if_grouped"] == pytest.approx(after.numbers["bytes"])
    assert "grouped (GROUP_M=8)" in after.primary.rationale[0]


def test_missing_names_are_named_and_tensors_asked_as_inputs():
    f = _gemm(ROW_MAJOR)
    a = estimate(f, f.kernels[0], H200, {})
    why = a.primary.rationale[0]
    assert why.startswith("bottleneck unknown: not sized: pass --input a=D0xD1:DTYPE --input b=D0xD1:DTYPE")


def test_list_comprehension_grid_names_its_free_names():
    """A grid built in a comprehension named no NAME at all."""
    src = ONE_D.replace("scale_kernel[(triton.cdiv(n, BLOCK),)]", "grid = [triton.cdiv(total, BLOCK) for _ in range(1)]\n    scale_kernel[grid]")
    src = src.replace("grid = [", "    grid = [", 1) if "\n    grid" not in src else src
    f = extract_source(src, "scale.py")
    a = estimate(f, f.kernels[0], H200, {})
    assert "--shape total=…" in a.primary.rationale[0]


def test_unknown_shape_names_are_rejected_listing_known_ones(tmp_path):
    from patterns.retriever.retrieve import RetrieveError, suggest

    p = tmp_path / "gemm.py"
    p.write_text(GEMM.replace("ORDER", ROW_MAJOR))
    with pytest.raises(RetrieveError, match=r"gemm.py: --shape: no kernel or launcher uses Q \(known: a, a_ptr, b, b_ptr, BLOCK_K"):
        suggest(p, shapes={"Q": 3}, entries=[])
    with pytest.raises(RetrieveError, match=r"--input: no kernel or launcher uses x "):
        suggest(p, inputs=_inputs(64) | {"x": _inputs(64)["a"]}, entries=[])


def test_kernel_launched_elsewhere_sized_from_its_pointer_inputs():
    from patterns.retriever.launcher import parse_inputs

    src = ONE_D.split("def scale(")[0]
    f = extract_source(src, "k.py")
    a = estimate(f, f.kernels[0], H200, {"BLOCK": 1024}, inputs=parse_inputs(["x_ptr=4096x4096:bf16"]))
    assert a.numbers["programs"] == 4096 * 4096 // 1024
    assert any("grid inferred" in r for r in a.primary.rationale)


@pytest.mark.parametrize("expr", ["9 ** 9 ** 9", "2 ** 100000", "(10 ** 100) * (10 ** 100) * (10 ** 100)", "1 << 100000", "'a' * 10 ** 9"])
def test_bounded_evaluator_refuses_huge_arithmetic(expr):
    from patterns.retriever.launcher import Unknown, safe_eval

    with pytest.raises(Unknown):
        safe_eval(expr, {})


def test_tensor_methods_in_launcher_arithmetic():
    from patterns.retriever.launcher import Tensor, safe_eval

    x = Tensor((8, 4096, 32, 128), "bfloat16")
    env = {"x": x}
    assert safe_eval("x.shape[-1]", env) == 128
    assert safe_eval("x.stride(1)", env) == 32 * 128
    assert safe_eval("x.numel() // x.shape[-1]", env) == 8 * 4096 * 32
    assert safe_eval("x.view(-1, x.shape[-1]).shape[0]", env) == 8 * 4096 * 32
    assert safe_eval("triton.cdiv(x.size(1), 64)", env) == 64
    assert safe_eval("torch.empty_like(x).element_size()", env) == 2


def test_malformed_input_is_a_usage_error():
    from patterns.retriever.launcher import InputError, parse_input

    with pytest.raises(InputError, match=r"expected NAME=D0xD1...\[:DTYPE\]"):
        parse_input("x=4096*4096")
    with pytest.raises(InputError, match="unknown dtype 'bf17'"):
        parse_input("x=4096:bf17")


# --------------------------------------------------------------------------------------
# Triton version gating
# --------------------------------------------------------------------------------------

def test_block_pointers_gated_on_triton_and_report_says_which(tmp_path):
    from patterns.core.library import load_library
    from patterns.retriever.retrieve import suggest

    p = tmp_path / "gemm.py"
    p.write_text(GEMM.replace("ORDER", ROW_MAJOR))
    entries = [e for e in load_library() if e.id in ("block_pointers", "tma_tensor_descriptors")]
    # unsized: the bottleneck is unknown and the patterns rank on code evidence alone
    old = suggest(p, entries=entries, triton="3.4.0", top=10)
    new = suggest(p, entries=entries, triton="3.9.0", top=10)
    assert old.kernels[0].bottleneck.rationale[0].startswith("bottleneck unknown")
    assert old.triton == "3.4.0" and new.triton == "3.9.0"
    assert "block_pointers" in [s.pattern_id for s in old.kernels[0].suggestions]
    assert "block_pointers" not in [s.pattern_id for s in new.kernels[0].suggestions]


# --------------------------------------------------------------------------------------
# CLI conventions
# --------------------------------------------------------------------------------------

def _cli(*args, cwd=None):
    import subprocess
    import sys

    env = {**os.environ, "COLUMNS": "80", "HF_HUB_OFFLINE": "1"}
    return subprocess.run([sys.executable, "-m", "patterns.cli", *map(str, args)], capture_output=True, text=True, env=env, timeout=300, cwd=cwd)


def test_version_and_short_help():
    from patterns import __version__

    r = _cli("--version")
    assert r.returncode == 0 and r.stdout.strip() == f"patterns {__version__}"
    h = _cli("-h")
    assert h.returncode == 0 and "suggest" in h.stdout


def test_suggest_on_a_directory_with_summary_and_fail_on(tmp_path):
    (tmp_path / "src" / "ops").mkdir(parents=True)
    (tmp_path / "src" / "ops" / "gemm.py").write_text(GEMM.replace("ORDER", ROW_MAJOR))
    (tmp_path / "src" / "scale.py").write_text(ONE_D)
    (tmp_path / "src" / "util.py").write_text("X = 1\n")
    r = _cli("suggest", tmp_path / "src", "--top", "2", "--input", "a=4096x4096:bf16", "--input", "b=4096x4096:bf16")
    assert r.returncode == 0, r.stderr
    last = r.stdout.strip().split("\n\n")[-1].replace("\n", " ")
    assert last.startswith("2 file(s) (1 without kernels skipped), 2 kernel(s): ")
    assert "1 compute-bound" in last and "1 unknown" in last
    # piped: plain text, 80 columns, no escape codes
    assert "\x1b[" not in r.stdout
    assert max(len(line) for line in r.stdout.splitlines() if str(tmp_path) not in line) <= 80
    fail = _cli("suggest", tmp_path / "src", "--fail-on", "compute-bound", "--input", "a=4096x4096:bf16", "--input", "b=4096x4096:bf16")
    assert fail.returncode == 1
    ok = _cli("suggest", tmp_path / "src", "--fail-on", "memory-bound,host-bound", "--input", "a=4096x4096:bf16", "--input", "b=4096x4096:bf16")
    assert ok.returncode == 0
    bad = _cli("suggest", tmp_path / "src", "--fail-on", "slow")
    assert bad.returncode == 2 and bad.stderr.strip().startswith("error: --fail-on: 'slow' is not one of memory-bound")


def test_pattern_ids_are_never_cut_at_80_columns(tmp_path):
    from patterns.core.library import load_library

    p = tmp_path / "gemm.py"
    p.write_text(GEMM.replace("ORDER", ROW_MAJOR))
    r = _cli("suggest", p, "--top", "10")
    ids = {e.id for e in load_library()}
    shown = [line.split(". ", 1)[1] for line in r.stdout.splitlines() if line[:5].strip().rstrip(".").isdigit() and ". " in line]
    assert shown and all(s in ids for s in shown)


def test_sarif_has_fingerprints_and_help_uri(tmp_path):
    import json

    p = tmp_path / "gemm.py"
    p.write_text(GEMM.replace("ORDER", ROW_MAJOR))
    r = _cli("suggest", p, "--format", "sarif", "--catalog-url", "https://example.org/catalog/")
    run = json.loads(r.stdout)["runs"][0]
    assert all(rule["helpUri"] == f"https://example.org/catalog/{rule['id']}.html" for rule in run["tool"]["driver"]["rules"])
    prints = [res["partialFingerprints"]["patternsKernelPattern/v1"] for res in run["results"]]
    assert len(prints) == len(set(prints)) > 0
    # a line moved above the kernel keeps every fingerprint
    p.write_text("# a comment\n" + p.read_text())
    moved = json.loads(_cli("suggest", p, "--format", "sarif", "--catalog-url", "https://example.org/catalog/").stdout)["runs"][0]
    assert [res["partialFingerprints"]["patternsKernelPattern/v1"] for res in moved["results"]] == prints


def test_launcher_defaults_are_what_the_caller_gets():
    """`def scale(x, BLOCK=65536)`: a caller who passes only x launches with BLOCK=65536."""
    from patterns.retriever.launcher import parse_inputs

    f = extract_source(ONE_D, "scale.py")
    assert f.host_defaults["scale"] == {"BLOCK": "65536"}
    a = estimate(f, f.kernels[0], H200, {}, inputs=parse_inputs(["x=4096x4096:fp32"]))
    assert a.numbers["programs"] == 4096 * 4096 // 65536
    assert a.numbers["bytes"] == 2 * 4096 * 4096 * 4  # x read and y (empty_like(x)) written, fp32


ROW = _src('''
    import torch
    import triton
    import triton.language as tl


    @triton.jit
    def row_scale_kernel(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
        row = tl.program_id(0)
        cols = tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(x_ptr + row * n_cols + cols, mask=mask)
        tl.store(y_ptr + row * n_cols + cols, x * 2.0, mask=mask)


    def row_scale(x):
        n_rows, n_cols = x.shape
        y = torch.empty_like(x)
        row_scale_kernel[(n_rows,)](x, y, n_cols, BLOCK=1024)
        return y
''')


def test_block_smaller_than_the_row_warns():
    from patterns.retriever.launcher import parse_inputs

    f = extract_source(ROW, "row.py")
    short = estimate(f, f.kernels[0], H200, {}, inputs=parse_inputs(["x=4096x4096:bf16"]))
    warn = [r for r in short.primary.rationale if r.startswith("warning:")]
    assert len(warn) == 2 and "BLOCK=1024 < n_cols=4096 at line 11: `tl.load`" in warn[0]
    fits = estimate(f, f.kernels[0], H200, {}, inputs=parse_inputs(["x=4096x1000:bf16"]))
    assert not [r for r in fits.primary.rationale if r.startswith("warning:")]


# --------------------------------------------------------------------------------------
# what is a kernel: device helpers, nested grid functions
# --------------------------------------------------------------------------------------

HELPER = _src('''
    import torch
    import triton
    import triton.language as tl


    @triton.jit
    def _silu(x):
        return x * tl.sigmoid(x)


    @triton.jit
    def act_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(y_ptr + offs, _silu(tl.load(x_ptr + offs, mask=m)), mask=m)


    def act(x, BLOCK: int = 1024):
        y = torch.empty_like(x)
        n = x.numel()
        def grid(meta):
            return (triton.cdiv(n, meta["BLOCK"]),)
        act_kernel[grid](x, y, n, BLOCK=BLOCK)
        return y
''')


def test_device_helpers_are_not_reported_as_kernels(tmp_path):
    from patterns.retriever.retrieve import suggest

    f = extract_source(HELPER, "act.py")
    assert [k.name for k in f.kernels if k.device_function] == ["_silu"]
    p = tmp_path / "act.py"
    p.write_text(HELPER)
    assert [k.kernel for k in suggest(p, entries=[]).kernels] == ["act_kernel"]


def test_nested_grid_function_is_replayed():
    from patterns.retriever.launcher import parse_inputs

    f = extract_source(HELPER, "act.py")
    k = next(k for k in f.kernels if k.name == "act_kernel")
    a = estimate(f, k, H200, {}, inputs=parse_inputs(["x=4096x4096:bf16"]))
    assert a.numbers["programs"] == 4096 * 4096 // 1024


ALIASED = _src('''
    import torch
    from mypkg.triton_utils import tl, triton


    def my_jit(fn):
        return triton.jit(fn, do_not_specialize=["n"])


    def copy_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


    copy_kernel_jit = triton.jit(copy_kernel)


    @my_jit
    def fill_kernel(y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(y_ptr + offs, tl.zeros((BLOCK,), dtype=tl.float32), mask=offs < n)


    def copy(x):
        y = torch.empty_like(x)
        n = x.numel()
        copy_kernel_jit[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024)
        fill_kernel[(triton.cdiv(n, 1024),)](y, n, BLOCK=1024)
        return y
''')


def test_triton_through_reexports_assignments_and_wrappers():
    """`from pkg.triton_utils import tl, triton`, `g = triton.jit(f)` and `@my_jit` are all Triton."""
    f = extract_source(ALIASED, "copy.py")
    kernels = {k.name: k for k in f.kernels}
    assert set(kernels) == {"copy_kernel", "fill_kernel"}
    assert {c.name for c in kernels["copy_kernel"].calls} >= {"tl.load", "tl.store", "tl.program_id", "tl.arange"}
    assert [la.line for la in kernels["copy_kernel"].launches] == [26]
    assert [la.line for la in kernels["fill_kernel"].launches] == [27]


SYNCS = _src('''
    import torch
    import triton
    import triton.language as tl


    @triton.jit
    def first_kernel(x_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + 1, mask=offs < n)


    @triton.jit
    def second_kernel(x_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)


    def first(x):
        n = x.numel()
        first_kernel[(triton.cdiv(n, 1024),)](x, n, BLOCK=1024)
        return x


    def second(x):
        n = int(x.sum().item())
        second_kernel[(triton.cdiv(n, 1024),)](x, n, BLOCK=1024)
        return x
''')


def test_host_sync_is_attributed_to_the_launch_it_delays():
    """One `.item()` in a launcher made every kernel of the file host-bound."""
    f = extract_source(SYNCS, "syncs.py")
    k = {k.name: k for k in f.kernels}
    first = estimate(f, k["first_kernel"], H200, {})
    second = estimate(f, k["second_kernel"], H200, {})
    assert BottleneckClass.host not in first.classes
    host = next(b for b in [second.primary, *second.others] if b.cls == BottleneckClass.host)
    assert "`item()` at line 25 before the launch at line 26" in host.rationale[0]


SOFTMAX = _src('''
    import torch
    import triton
    import triton.language as tl


    @triton.jit
    def softmax_kernel(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
        row = tl.program_id(0)
        m = float("-inf")
        d = 0.0
        for start in range(0, n_cols, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            x = tl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols, other=float("-inf"))
            m_new = tl.maximum(m, tl.max(x, axis=0))
            d = d * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new), axis=0)
            m = m_new
        for start in range(0, n_cols, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            x = tl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols, other=float("-inf"))
            tl.store(y_ptr + row * n_cols + cols, tl.exp(x - m) / d, mask=cols < n_cols)


    def softmax(x):
        n_rows, n_cols = x.shape
        y = torch.empty_like(x)
        softmax_kernel[(n_rows,)](x, y, n_cols, BLOCK=1024)
        return y
''')


def test_rewrites_that_would_refuse_say_so(tmp_path):
    """`rewrite: split_kv_lse_merge` was listed for a softmax that `apply` then refused."""
    from patterns import api
    from patterns.rewriter.base import RewriteError, apply

    p = tmp_path / "softmax.py"
    p.write_text(SOFTMAX)
    report = api.suggest_report(p, top=27, check_rewrites_=True)
    with_rewrite = [s for s in report.kernels[0].suggestions if s.rewrite]
    assert with_rewrite and all(s.rewrite_checked for s in with_rewrite)
    for s in with_rewrite:  # the note agrees with what apply does
        try:
            apply(s.pattern_id, SOFTMAX, str(p), kernel="softmax_kernel")
            assert s.rewrite_refusal == "", s.pattern_id
        except RewriteError:
            assert s.rewrite_refusal, s.pattern_id


from test_review import _item, env  # noqa: E402,F401  (the review tests' agent run and its isolated home)


def test_review_show_prints_a_diff_git_apply_accepts(env, tmp_path):
    """`patterns review show ID | git apply`: the diff is never wrapped, whatever the width."""
    import shutil
    import subprocess
    import sys

    if shutil.which("git") is None:
        pytest.skip("git not installed")
    item = _item(env)
    out = subprocess.run([sys.executable, "-m", "patterns.cli", "review", "show", item.id], capture_output=True, text=True,
                         env={**os.environ, "COLUMNS": "60"}, timeout=300)
    assert out.returncode == 0, out.stderr
    repo = tmp_path / "repo"
    repo.mkdir()
    target = Path(item.target)
    shutil.copy(target, repo / target.name)
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    check = subprocess.run(["git", "apply", "--check", "-v", "-"], input=out.stdout, cwd=repo, capture_output=True, text=True)
    assert check.returncode == 0, check.stderr


PID_WRAPPERS = _src('''
    import triton
    import triton.language as tl

    from ..utils import triton_lang_extension as tle


    @triton.jit
    def pid64(axis):
        return tl.program_id(axis).to(tl.int64)


    @triton.jit
    def imported_kernel(x_ptr, y_ptr, n, TILE_M: tl.constexpr):
        pid_m = tle.program_id(0)
        offs = pid_m * TILE_M + tl.arange(0, TILE_M)
        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


    @triton.jit
    def local_kernel(x_ptr, y_ptr, n, TILE_M: tl.constexpr):
        pid_m = pid64(0)
        offs = pid_m * TILE_M + tl.arange(0, TILE_M)
        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)
''')


def test_program_id_through_wrappers_is_the_program_id():
    """flag_gems takes every program id through `tle.program_id(0)` (a @triton.jit wrapper returning
    `tl.program_id(axis).to(tl.int64)`): no tile index was seen, and persistent_tile_loop was gated out
    on its GEMMs."""
    from patterns.core.predicates import Subject, evaluate
    from patterns.core.schema import Condition

    f = extract_source(PID_WRAPPERS, "wrapped.py")
    tiles = Condition.model_validate({"tiles_axis_by_program": {"block_param": ["TILE_M"]}})
    for name in ("imported_kernel", "local_kernel"):
        k = next(k for k in f.kernels if k.name == name)
        assert [c.name for c in k.calls if "program" in c.name] == ["tl.program_id"]
        assert k.pid_deps["offs"] == [0]
        v = evaluate(tiles, Subject(f, k))
        assert v.ok and v.lines == [15 if name == "imported_kernel" else 22]


HELPER_LOOP = _src('''
    import triton
    import triton.language as tl


    @triton.jit
    def _load_kv(ptrs):
        return tl.load(ptrs)


    @triton.jit
    def _attn_inner(acc, q, k_ptrs, n_kv, BLOCK_N: tl.constexpr):
        for start in range(0, n_kv, BLOCK_N):
            k = _load_kv(k_ptrs + start)
            acc += tl.dot(q, k)
        return acc


    @triton.jit
    def attn_kernel(q_ptr, k_ptr, o_ptr, n_kv, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
        q = tl.load(q_ptr + tl.arange(0, BLOCK_M)[:, None] * BLOCK_N + tl.arange(0, BLOCK_N)[None, :])
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        acc = _attn_inner(acc, q, k_ptr, n_kv, BLOCK_N)
        tl.store(o_ptr + tl.arange(0, BLOCK_M)[:, None] * BLOCK_N + tl.arange(0, BLOCK_N)[None, :], acc)
''')


def test_loops_of_helpers_are_the_kernels_loops():
    """lmdeploy's prefill attention runs its KV loop in `_prefill_fwd_inner` and loads through
    `_load_kv`: the kernel had no loop, so no loop predicate held and warp_specialization (a loop calling
    tl.dot and a load) was gated out on a compute-bound attention."""
    from patterns.core.predicates import Subject, evaluate
    from patterns.core.schema import Condition

    f = extract_source(HELPER_LOOP, "attn.py")
    k = next(k for k in f.kernels if k.name == "attn_kernel")
    assert [(lp.line, lp.via, lp.depth) for lp in k.loops] == [(12, "_attn_inner", 0)]
    cond = Condition.model_validate({"loop_calls": {"each_of": [["tl\\.dot"], [".*\\.load", "tl\\.load"]]}})
    v = evaluate(cond, Subject(f, k))
    assert v.ok and v.lines == [12]
    helper = next(k for k in f.kernels if k.name == "_attn_inner")
    assert [lp.via for lp in helper.loops] == [""]


def _ragged_k_gemm():
    src = (GEMM.replace("ORDER", ROW_MAJOR)
           .replace("def matmul_kernel(a_ptr, b_ptr, c_ptr,", "def matmul_kernel(a_ptr, b_ptr, c_ptr, k_lens_ptr,")
           .replace("for k in range(0, tl.cdiv(K, BLOCK_K)):", "k_len = tl.load(k_lens_ptr + pid_m)\n    for k in range(0, tl.cdiv(k_len, BLOCK_K)):")
           .replace("def matmul(a, b):", "def matmul(a, b, k_lens):")
           .replace("matmul_kernel[grid](a, b, c,", "matmul_kernel[grid](a, b, c, k_lens,"))
    return extract_source(src, "ragged_gemm.py")


def test_dot_flops_left_open_are_not_a_roofline_verdict():
    """With inputs, a GEMM whose K loop bound is read from memory (and an attention whose tl.dot operands
    come through a helper) had its loop counted once and its dot FLOPs as 0: torchao's and lmdeploy's
    compute-bound kernels were called memory-bound from their bytes alone."""
    f = _ragged_k_gemm()
    a = estimate(f, f.kernels[0], H200, {}, inputs=_inputs(4096))
    assert not a.measured and "flops" not in a.numbers
    assert a.primary.cls == BottleneckClass.compute  # the unsized guess for a tl.dot loop
    why = a.primary.rationale[0]
    assert "grid sized, tl.dot FLOPs not: trip count of the loop at line 21 around tl.dot (`range(0, tl.cdiv(k_len, BLOCK_K))`)" in why
    # the same GEMM with its K from the launcher is still sized, and compute-bound on its numbers
    g = _gemm(ROW_MAJOR)
    b = estimate(g, g.kernels[0], H200, {}, inputs=_inputs(4096))
    assert b.measured and b.numbers["dot_flops"] == 2 * 4096**3


SELF_CHECK = _src('''
    import torch
    import triton
    import triton.language as tl


    @triton.jit
    def scale_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)


    def _self_check():
        x = torch.randn(200)
        y = torch.empty_like(x)
        scale_kernel[(2 * 2,)](x, y, 200, BLOCK=64)
        return torch.equal(y, x * 2)


    def scale(x):
        y = torch.empty_like(x)
        n = x.numel()
        scale_kernel[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024)
        return y
''')


def test_a_fixed_self_check_launch_is_not_the_one_sized():
    """unsloth's fp8 GEMM is launched once per device on a 200x256x400 self-check with grid (2 * 2,)
    before its real launch: the estimate sized the check and called a 4096³ GEMM occupancy-bound
    (4 programs fill 3% of the SMs)."""
    from patterns.retriever.launcher import parse_inputs

    f = extract_source(SELF_CHECK, "scale.py")
    k = f.kernels[0]
    assert [la.line for la in k.launches] == [15, 22]
    a = estimate(f, k, H200, {}, inputs=parse_inputs(["x=4096x4096:bf16"]))
    assert a.numbers["programs"] == 4096 * 4096 // 1024
    assert a.primary.cls == BottleneckClass.memory


HOST_TRIGGERS = _src('''
    import torch
    import triton
    import triton.language as tl


    @triton.jit
    def row_softmax_kernel(x_ptr, y_ptr, lens_ptr, n_cols, BLOCK: tl.constexpr):
        row = tl.program_id(0)
        n = tl.load(lens_ptr + row)
        m = float("-inf")
        for start in range(0, n, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            x = tl.load(x_ptr + row * n_cols + cols, mask=cols < n, other=float("-inf"))
            m = tl.maximum(m, tl.max(tl.exp(x), 0))
        tl.store(y_ptr + row, m)


    def softmax_rows(x, lens):
        x = x.contiguous()
        y = torch.empty(x.shape[0], device=x.device)
        row_softmax_kernel[(x.shape[0],)](x, y, lens, x.shape[1], BLOCK=1024)
        return y


    def gathered_rows(cache, rows, lens):
        x = cache[rows].contiguous()
        y = torch.empty(x.shape[0], device=x.device)
        row_softmax_kernel[(x.shape[0],)](x, y, lens, x.shape[1], BLOCK=1024)
        return y


    def report(y):
        return y.max().item()
''')


def test_host_triggers_are_this_kernels_launcher():
    """An `.item()` in an unrelated function made varlen_cu_seqlens and cuda_graph_safe_grid apply to
    unsloth's fp8 GEMM (ranked 2nd and 3rd), and a `.contiguous()` anywhere in the file made
    paged_kv_indexing apply to liger's softmax, JSD and log-softmax kernels."""
    from patterns.core.library import load_library
    from patterns.core.predicates import Subject, evaluate

    lib = {e.id: e.pattern for e in load_library()}
    f = extract_source(HOST_TRIGGERS, "rows.py")
    s = Subject(f, f.kernels[0])
    for pid in ("cuda_graph_safe_grid", "varlen_cu_seqlens"):
        v = evaluate(lib[pid].applies_when.conditions, s)
        assert not v.ok or not any(".item" in r for r in v.reasons), pid  # line 33 delays no launch
    paged = evaluate(lib["paged_kv_indexing"].applies_when.conditions, s)
    assert paged.ok and "launch passes x_ptr as `x = cache[rows].contiguous()` (line 28)" in paged.reasons
    synced = HOST_TRIGGERS.replace("    x = x.contiguous()\n", "    x = x.contiguous()\n    assert lens.max().item() > 0\n", 1)
    f2 = extract_source(synced, "rows.py")
    v = evaluate(lib["cuda_graph_safe_grid"].applies_when.conditions, Subject(f2, f2.kernels[0]))
    assert v.ok and "launcher calls item before the launch: `.item()` (line 20)" in v.reasons
    only_contiguous = HOST_TRIGGERS.split("def gathered_rows")[0]
    f3 = extract_source(only_contiguous, "rows.py")
    assert not evaluate(lib["paged_kv_indexing"].applies_when.conditions, Subject(f3, f3.kernels[0])).ok


DISPATCHED = _src('''
    import json

    import torch
    import triton
    import triton.language as tl


    @triton.jit
    def scale_kernel(x_ptr, y_ptr, n, BLOCK_SIZE: tl.constexpr):
        offs = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)


    @triton.jit
    def scale_kernel_wide(x_ptr, y_ptr, n, BLOCK_SIZE: tl.constexpr):
        offs = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)


    def select_kernel(n, config):
        return scale_kernel


    def scale(x, wide: bool):
        y = torch.empty_like(x)
        n = x.numel()
        config = json.load(open(f"configs/n={n}.json"))
        if wide:
            kernel = scale_kernel_wide
        else:
            kernel = select_kernel(n, config)
        kernel[(triton.cdiv(n, config["BLOCK_SIZE"]),)](x, y, n, **config)
        return y
''')


def test_a_launch_through_a_kernel_variable_is_each_kernels_launch():
    """sglang's fp8 block GEMM launches `kernel[grid](..., **config)` where `kernel` is a per-platform
    choice or `select_w8a8_block_fp8_matmul_kernel(M, N, config)`'s result, with tile sizes from
    per-device JSON tables: no kernel had a launch, so the JSON-table tuning was not seen and every
    launch predicate failed."""
    from patterns.core.library import load_library
    from patterns.core.predicates import Subject, evaluate

    f = extract_source(DISPATCHED, "dispatch.py")
    k = {k.name: k for k in f.kernels}
    assert [la.line for la in k["scale_kernel"].launches] == [32]
    assert [la.line for la in k["scale_kernel_wide"].launches] == [32]
    tuned = next(e.pattern for e in load_library() if e.id == "autotune_configs_keys").present_when
    v = evaluate(tuned, Subject(f, k["scale_kernel"]))
    assert v.ok and v.reasons == ["launch takes `config` from a tuned config (line 32)"]


def test_dot_scaled_flops_are_counted():
    """tl.dot_scaled was a dot for the conditions but not for the estimate: an MX GEMM (sglang's
    mxfp8 linear) had 0 dot FLOPs and read as memory-bound."""
    src = GEMM.replace("ORDER", ROW_MAJOR).replace("acc += tl.dot(a, b)", 'acc += tl.dot_scaled(a, None, "e4m3", b, None, "e4m3")')
    f = extract_source(src, "mx_gemm.py")
    a = estimate(f, f.kernels[0], H200, {}, inputs=_inputs(4096))
    assert a.numbers["dot_flops"] == 2 * 4096**3
    assert a.numbers["ridge_flop_per_byte"] == pytest.approx(H200.ridge("float8"), abs=0.1)
    fp4 = src.replace('"e4m3")', '"e2m1")')
    f4 = extract_source(fp4, "mx_gemm.py")
    assert estimate(f4, f4.kernels[0], H200, {}, inputs=_inputs(4096)).numbers["dot_flops"] == 2 * 2 * 4096**3
    # sglang passes its [N, K] weight tile as `w.T`
    t = src.replace('tl.dot_scaled(a, None, "e4m3", b,', 'tl.dot_scaled(a, None, "e4m3", tl.trans(b).T,')
    ft = extract_source(t, "mx_gemm.py")
    assert estimate(ft, ft.kernels[0], H200, {}, inputs=_inputs(4096)).numbers["dot_flops"] == 2 * 4096**3


ROW_NORM = _src('''
    import torch
    import triton
    import triton.language as tl

    from .utils import calculate_settings


    @triton.jit
    def norm_kernel(x_ptr, y_ptr, n_cols, BLOCK_SIZE: tl.constexpr):
        row = tl.program_id(0)
        cols = tl.arange(0, BLOCK_SIZE)
        x = tl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
        m = tl.sum(x, 0) / n_cols
        d = x - m
        v = tl.sum(d * d, 0) / n_cols
        y = d * tl.rsqrt(v + 1e-6)
        z = y * 2.0
        w = z + x
        u = w * d
        q = u + y
        tl.store(y_ptr + row * n_cols + cols, q + z, mask=cols < n_cols)


    def norm(x):
        n_rows, n_cols = x.shape
        y = torch.empty_like(x)
        BLOCK_SIZE, num_warps = calculate_settings(n_cols)
        norm_kernel[(n_rows,)](x, y, n_cols, BLOCK_SIZE=BLOCK_SIZE, num_warps=num_warps)
        return y
''')


def test_num_warps_the_replay_cannot_read_is_no_register_estimate():
    """liger's norms take `BLOCK_SIZE, num_warps = calculate_settings(n_cols)` from another module: the
    estimate assumed Triton's default 4 warps and called a 4096-wide row norm occupancy-bound by
    register spills; calculate_settings gives it 8 or 16 warps."""
    from patterns.retriever.launcher import parse_inputs

    f = extract_source(ROW_NORM, "norm.py")
    inputs = parse_inputs(["x=4096x4096:bf16"])
    a = estimate(f, f.kernels[0], H200, {"BLOCK_SIZE": 4096}, inputs=inputs)
    assert a.primary.cls == BottleneckClass.memory and BottleneckClass.occupancy not in a.classes
    assert "registers per thread not estimated: the launch's num_warps=num_warps could not be evaluated" in " ".join(a.primary.rationale)
    # given, the register estimate is made again
    b = estimate(f, f.kernels[0], H200, {"BLOCK_SIZE": 4096, "num_warps": 4}, inputs=inputs)
    assert BottleneckClass.occupancy in b.classes
    c = estimate(f, f.kernels[0], H200, {"BLOCK_SIZE": 4096, "num_warps": 16}, inputs=inputs)
    assert BottleneckClass.occupancy not in c.classes and c.numbers["num_warps"] == 16


TWO_LAUNCHES = _src('''
    import torch
    import triton
    import triton.language as tl


    @triton.jit
    def gemm_kernel(a, b, c, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
        i_m, i_n = tl.program_id(0), tl.program_id(1)
        o_m = i_m * BM + tl.arange(0, BM)
        o_n = i_n * BN + tl.arange(0, BN)
        acc = tl.zeros([BM, BN], dtype=tl.float32)
        for k in range(0, K, BK):
            o_k = k + tl.arange(0, BK)
            acc += tl.dot(tl.load(a + o_m[:, None] * K + o_k[None, :]), tl.load(b + o_k[:, None] * N + o_n[None, :]))
        tl.store(c + o_m[:, None] * N + o_n[None, :], tl.sigmoid(acc) * acc)


    @triton.jit
    def fill_kernel(x, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(x + offs, tl.zeros([BLOCK], dtype=tl.float32), mask=offs < n)


    def forward(a, b, counts):
        M, K = a.shape
        N = b.shape[1]
        fill_kernel[(triton.cdiv(counts.numel(), 256),)](counts, counts.numel(), BLOCK=256)
        c = torch.empty(M, N, device=a.device, dtype=a.dtype)
        gemm_kernel[(triton.cdiv(M, 64), triton.cdiv(N, 64))](a, b, c, M, N, K, BM=64, BN=64, BK=32)
        fill_kernel[(triton.cdiv(counts.numel(), 256),)](counts, counts.numel(), BLOCK=256)
        return c
''')


def test_two_launches_in_one_function_are_no_data_flow():
    """int4_dequant_in_gemm, fused_silu_mul_quant and fused_epilogue applied to any kernel of a file
    where one host function launches two kernels (`launch_sequence`): int4 dequantization was suggested
    for fp8 and bf16 GEMMs, a fused quantizer for every SiLU. They now need the other launch to write
    what this kernel reads (a dequantizer) or to read what it writes (a quantizer, an epilogue)."""
    from patterns.core.library import load_library
    from patterns.core.predicates import Subject, evaluate

    lib = {e.id: e.pattern for e in load_library()}
    f = extract_source(TWO_LAUNCHES, "two.py")
    s = Subject(f, next(k for k in f.kernels if k.name == "gemm_kernel"))
    for pid in ("int4_dequant_in_gemm", "fused_silu_mul_quant", "fused_epilogue"):
        assert not evaluate(lib[pid].applies_when.conditions, s).ok, pid
    # the library's own before-examples still have the data flow, named with its lines
    for pid, kernel, reason in [
        ("int4_dequant_in_gemm", "gemm_nt_kernel", "dequant_int4_kernel (launched at line 43) writes `w`, which this kernel reads (line 45)"),
        ("fused_silu_mul_quant", "silu_mul_fwd_kernel", "group_quant_fwd_kernel (launched at line 46) reads `h`, which this kernel writes (line 43)"),
    ]:
        from patterns.core.facts import extract_file
        from patterns.core.library import library_dir

        fb = extract_file(library_dir() / pid / "before.py")
        v = evaluate(lib[pid].applies_when.conditions, Subject(fb, next(k for k in fb.kernels if k.name == kernel)))
        assert v.ok and reason in v.reasons, pid


def test_corpus_gives_no_block_size_a_launcher_fixes():
    """The corpus run gave `--shape BLOCK_N=64` for one kernel of flag_gems' var_mean.py, and the
    file-wide name overrode another launcher's own `BLOCK_N = 1024`: blocks a launch passes as a
    number are no name to give."""
    from patterns.retriever.corpus import _launch_literals, plausible_blocks

    src = SYNCS.replace("first_kernel[(triton.cdiv(n, 1024),)](x, n, BLOCK=1024)",
                        "BLOCK = 1024\n    first_kernel[(triton.cdiv(n, BLOCK),)](x, n, BLOCK=BLOCK)")
    f = extract_source(src, "syncs.py")
    k = {k.name: k for k in f.kernels}
    assert _launch_literals(f, k["first_kernel"]) == {"BLOCK"}
    assert plausible_blocks(k["first_kernel"], {}, f) == {}
    assert plausible_blocks(k["first_kernel"], {}) == {"BLOCK": 64}  # without the launcher: a tile to give


def test_shape_conditions_are_checked_on_sizes_from_inputs(tmp_path):
    """swap_ab_small_m (M <= 64) stayed in the top 5 of 4096x4096 GEMMs sized from --input: shape
    conditions were checked against --shape only, and M from `M, K = a.shape` was 'unchecked'."""
    from patterns.core.library import load_library
    from patterns.retriever.launcher import parse_inputs
    from patterns.retriever.retrieve import suggest

    p = tmp_path / "gemm.py"
    p.write_text(GEMM.replace("ORDER", ROW_MAJOR))
    entries = [e for e in load_library() if e.id == "swap_ab_small_m"]
    big = suggest(p, entries=entries, inputs=parse_inputs(["a=4096x4096:bf16", "b=4096x4096:bf16"]), top=5)
    assert big.kernels[0].suggestions == []
    small = suggest(p, entries=entries, inputs=parse_inputs(["a=32x4096:bf16", "b=4096x4096:bf16"]), top=5)
    s = small.kernels[0].suggestions
    assert [x.pattern_id for x in s] == ["swap_ab_small_m"] and "shape M=32 (from the inputs) in [None, 64]" in s[0].matched
    given = suggest(p, entries=entries, shapes={"M": 32}, inputs=parse_inputs(["a=4096x4096:bf16", "b=4096x4096:bf16"]), top=5)
    assert "shape M=32 in [None, 64]" in given.kernels[0].suggestions[0].matched  # --shape wins over the replay


def test_int64_offsets_only_where_a_given_tensor_can_wrap_int32(tmp_path):
    """int64_offsets ranked first on 68 corpus kernels sized from 4096x4096 inputs (16.8M elements):
    an int32 element offset wraps only past 2^31 elements, which the given tensors say."""
    from patterns.core.library import load_library
    from patterns.retriever.launcher import parse_inputs
    from patterns.retriever.retrieve import suggest

    p = tmp_path / "norm.py"
    p.write_text(ROW_NORM)  # `x_ptr + row * n_cols + cols`: an int32 program id times a runtime stride
    entries = [e for e in load_library() if e.id == "int64_offsets"]
    small = suggest(p, entries=entries, inputs=parse_inputs(["x=4096x4096:bf16"]), top=5)
    assert small.kernels[0].suggestions == []
    big = suggest(p, entries=entries, inputs=parse_inputs(["x=65536x65536:bf16"]), top=5)
    s = big.kernels[0].suggestions
    assert [x.pattern_id for x in s] == ["int64_offsets"]
    assert f"shape largest_tensor_numel={65536 * 65536} (from the inputs) in [2147483648, None]" in s[0].matched
    unsized = suggest(p, entries=entries, top=5).kernels[0].suggestions
    assert "unchecked: largest_tensor_numel in [2147483648, None] (give the kernel's tensors with --input)" in unsized[0].matched
