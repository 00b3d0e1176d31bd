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


NCU_REP = os.environ.get("PATTERNS_NCU_REP")


@pytest.mark.skipif(not NCU_REP, reason="set PATTERNS_NCU_REP to a .ncu-rep captured on a GPU host (see evidence/gpu/ncu-rep/run.sh)")
def test_binary_ncu_report_is_read():
    pytest.importorskip("ncu_report")
    from patterns.retriever.profile import load_profile

    bs = load_profile(Path(NCU_REP), "")
    assert bs[0].source == "ncu" and bs[0].numbers["duration_us"] > 0


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
