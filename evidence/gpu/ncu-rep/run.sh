#!/usr/bin/env bash
# Capture one binary Nsight Compute report on a GPU host, for the test that
# reads .ncu-rep on a CPU-only machine (tests/test_suggest_defects.py,
# test_binary_ncu_report_is_read). Needs ncu on PATH, torch + triton.
#   bash evidence/gpu/ncu-rep/run.sh            # writes evidence/gpu/ncu-rep/matmul.ncu-rep
# then, anywhere: pip install 'patterns[ncu]'
#   PATTERNS_NCU_REP=evidence/gpu/ncu-rep/matmul.ncu-rep pytest -q tests/test_suggest_defects.py -k binary
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cat > "$here/gemm.py" <<'PY'
import torch
a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
b = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
for _ in range(3):
    c = a @ b
torch.cuda.synchronize()
PY
ncu --set full -c 3 -f -o "$here/matmul" python "$here/gemm.py"
ncu --import "$here/matmul.ncu-rep" --csv --page raw > "$here/matmul.csv"
echo "wrote $here/matmul.ncu-rep and $here/matmul.csv"
