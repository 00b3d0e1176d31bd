#!/usr/bin/env bash
# Capture binary Nsight Compute reports on a GPU host, for the test that reads
# .ncu-rep on a CPU-only machine (tests/test_suggest_defects.py,
# test_binary_ncu_report_is_read, which reads the committed matmul.ncu-rep).
# Needs ncu on PATH, torch + triton, and this repository importable (kernels/).
#   OUT=/tmp/ncu bash evidence/gpu/ncu-rep/run.sh
# writes $OUT/matmul.ncu-rep: the project's Triton matmul (kernels/matmul/baseline.py)
# at 4096^3 bf16, three launches, the sections suggest reads (speed of light,
# launch statistics, occupancy), and $OUT/matmul.csv, its `--page raw` export.
# Back here: copy matmul.ncu-rep and matmul.csv into evidence/gpu/ncu-rep/, then
#   pip install 'patterns[ncu]'; pytest -q tests/test_suggest_defects.py -k ncu
set -euo pipefail
: "${OUT:?set OUT to the folder for the report}"
mkdir -p "$OUT"
cat > "$OUT/gemm.py" <<'PY'
import torch
from patterns.kernels.matmul.baseline import matmul
a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
b = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
for _ in range(4):  # the first launch compiles; ncu profiles launches 2-4 (-s 1 -c 3)
    c = matmul(a, b)
torch.cuda.synchronize()
PY
ncu --clock-control none -k regex:matmul -s 1 -c 3 --section SpeedOfLight --section LaunchStats --section Occupancy \
    -f -o "$OUT/matmul" python3 "$OUT/gemm.py"
ncu --import "$OUT/matmul.ncu-rep" --csv --page raw > "$OUT/matmul.csv"
rm -f "$OUT/gemm.py"
ls -la "$OUT"
