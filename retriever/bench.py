"""Benchmark of the retriever's speed targets (whole processes, as a user runs them).

    python -m patterns.retriever.bench [--runs 7]

1. `patterns suggest` on a ~500-line kernel file with the index built: median
   whole-process wall time over N runs (target < 1.5 s on a 2-core machine),
   for an unchanged file (facts, library and query embeddings cached) and for a
   file edited before every run (its facts extracted again).
2. `patterns index` for a 100-pattern library from scratch (target < 20 s): the
   library's own 27 patterns copied to 100 ids, each with its own title, so
   every pattern text is distinct and embedded. The kernel facts of the
   patterns' before.py files (the generality statistic) are cached from the
   27-pattern build, whose files are the same; a last row repeats the build
   with that cache empty too.

Child processes cache bytecode (in a temporary PYTHONPYCACHEPREFIX), as an
installed package does, even where PYTHONDONTWRITEBYTECODE is set.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from patterns.core.library import load_library

SET = Path(__file__).resolve().parents[1] / "tests" / "retrieval_set"
SOURCES = ["decode_attention_nosplit.py", "gemm_naive.py", "gemm_tuned.py", "rmsnorm_two_pass.py", "softmax_three_pass.py",
           "matmul_then_bias_gelu.py", "gated_delta_decode_vtiled.py", "flash_attention_fwd.py", "persistent_gemm.py",
           "layernorm_naive_variance.py", "recurrent_state_chain.py", "skinny_gemm.py", "streaming_lookup_scale.py"]


def big_kernel_file(dest: Path, lines: int = 500) -> Path:
    """Concatenate project kernels (renamed apart) into one file of at least `lines` lines."""
    parts, n, i = ["import torch\nimport triton\nimport triton.language as tl\n"], 3, 0
    while n < lines:
        src = (SET / SOURCES[i % len(SOURCES)]).read_text()
        body = "\n".join(ln for ln in src.splitlines() if not ln.startswith(("import ", "from ")))
        suffix = f"_{i}"
        for name in re.findall(r"^def (\w+)", body, re.M):
            body = re.sub(rf"\b{name}\b", name + suffix, body)
        parts.append(body)
        n += body.count("\n") + 1
        i += 1
    dest.write_text("\n\n".join(parts) + "\n")
    return dest


def big_library(dest: Path, size: int = 100, source: Path | None = None) -> Path:
    entries = load_library(source)
    for i in range(size):
        e = entries[i % len(entries)]
        new_id = f"{e.id}_v{i}"
        shutil.copytree(e.folder, dest / new_id)
        y = dest / new_id / "pattern.yaml"
        y.write_text(y.read_text().replace(f"id: {e.id}\n", f"id: {new_id}\n", 1).replace("title: ", f"title: (variant {i}) ", 1))
    return dest


def timed(cmd: list[str], env: dict) -> float:
    t = time.perf_counter()
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    dt = time.perf_counter() - t
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed: {r.stderr.strip().splitlines()[-1] if r.stderr.strip() else r.returncode}")
    return dt


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=7)
    args = ap.parse_args()
    console = Console()
    load_start = " / ".join(f"{x:.2f}" for x in os.getloadavg())
    exe = [sys.executable, "-m", "patterns.cli"]
    table = Table("measurement", "median", "min", "max", "runs", "target", title="retriever benchmark", title_justify="left")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        # a frozen copy of the library: the numbers must not depend on edits made meanwhile
        shutil.copytree(load_library()[0].folder.parent, tmp / "lib")
        env = {**os.environ, "PATTERNS_INDEX_DIR": str(tmp / "idx"), "PATTERNS_LIBRARY": str(tmp / "lib"),
               "PATTERNS_FACTS_CACHE": str(tmp / "facts"), "PATTERNS_LIBRARY_CACHE": str(tmp / "library"),
               "PYTHONPYCACHEPREFIX": str(tmp / "pycache")}
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        kernel = big_kernel_file(tmp / "kernels_500.py")
        n_lines = kernel.read_text().count("\n")
        t_index = timed(exe + ["index"], env)
        cmd = exe + ["suggest", str(kernel), "--shape", "B=8", "--shape", "T=4096", "--format", "json"]
        timed(cmd, env)  # first run fills the facts and query caches
        runs = [timed(cmd, env) for _ in range(args.runs)]
        table.add_row(f"suggest, unchanged {n_lines}-line file, index built", f"{statistics.median(runs):.2f} s", f"{min(runs):.2f} s",
                      f"{max(runs):.2f} s", str(len(runs)), "< 1.5 s")
        cold = []
        for i in range(args.runs):  # an edit before every run: nothing cached but the index
            kernel.write_text(kernel.read_text() + f"\n# edit {i}\n")
            cold.append(timed(cmd, env))
        table.add_row(f"suggest, {n_lines}-line file edited before each run", f"{statistics.median(cold):.2f} s", f"{min(cold):.2f} s",
                      f"{max(cold):.2f} s", str(len(cold)), "")
        table.add_row(f"index, library of {len(load_library(tmp / 'lib'))} (cold)", f"{t_index:.2f} s", "", "", "1", "")
        lib = big_library(tmp / "lib100", source=tmp / "lib")
        env100 = {**env, "PATTERNS_LIBRARY": str(lib), "PATTERNS_INDEX_DIR": str(tmp / "idx100")}
        t100 = [timed(exe + ["index"], env100)]
        shutil.rmtree(tmp / "idx100")
        t100.append(timed(exe + ["index"], env100))
        table.add_row("index, library of 100 (from scratch)", f"{statistics.median(t100):.2f} s", f"{min(t100):.2f} s",
                      f"{max(t100):.2f} s", str(len(t100)), "< 20 s")
        t_inc = timed(exe + ["index"], env100)
        table.add_row("index, library of 100 (unchanged, incremental)", f"{t_inc:.2f} s", "", "", "1", "")
        shutil.rmtree(tmp / "idx100")
        t_cold = timed(exe + ["index"], {**env100, "PATTERNS_FACTS_CACHE": str(tmp / "facts-cold")})
        table.add_row("index, library of 100 (from scratch, facts cache empty)", f"{t_cold:.2f} s", "", "", "1", "")
    console.print(table)
    load = " / ".join(f"{x:.2f}" for x in os.getloadavg())
    console.print(f"machine: {os.cpu_count()} cores; load average (1 / 5 / 15 min) {load_start} at the start, {load} at the end; "
                  f"python {sys.version.split()[0]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
