#!/usr/bin/env bash
# Issue #20 on one H200: the perf gate's timed section run in the gate's child process
# (how candidates run now) and in-process (how they ran before), alternating in one
# driver process, CUDA graphs + L2 flush as in every gate run; per shape the speed
# ratio each arm measured and the arms' ratios both ways. Then one whole gate run
# (`patterns validate kda_decode <rewrite> --device cuda`) through the CLI.
# Run from the repository root on the GPU machine with OUT set to a results folder;
# the wheels the machine lacks (pydantic, platformdirs, libcst, ...) are in .whl/.
# Writes $OUT/overhead.json, overhead.md, gpu.txt, run.log, validate-kda_decode.{log,json}.
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 COLUMNS=160
( cd /tmp && python3 -c "import patterns.validation.sandbox" 2>/dev/null ) || python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null || exit
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv | tee "$OUT/gpu.txt"
REPS=${REPS:-2} ROUNDS=${ROUNDS:-20} timeout "${BUDGET:-420}" python3 evidence/gpu/h200-gate/overhead.py ${OPS:-kda_decode matmul cp_state_merge decode_attention} 2>&1 | tee "$OUT/run.log"
echo "overhead exit ${PIPESTATUS[0]}" | tee -a "$OUT/run.log"
timeout 150 patterns validate kda_decode evidence/gpu/h200-kda_decode/candidate-fused.py --device cuda --out "$OUT/bundle" --format json \
    > "$OUT/validate-kda_decode.json" 2> "$OUT/validate-kda_decode.log"
echo "validate exit $?" | tee -a "$OUT/run.log"
