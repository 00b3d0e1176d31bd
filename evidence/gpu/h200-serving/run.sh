#!/usr/bin/env bash
# End to end on one H200 (issue #19): the registry's v1 (kernels/<op>/baseline.py) against the live accepted
# versions of the agent's evidence (evidence/gpu/h200-agent/agent-home), interleaved in one process, decode steps
# replayed from CUDA graphs, at batch 1/8/32/64 and contexts of 4k and 32k tokens of the h200 preset.
#
# One command, from the repository root on the GPU machine, with OUT set and the wheels the machine lacks in .whl/
# (2.8 MB; fetched here, in the repository root, with
#     python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#         --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .whl \
#         pydantic==2.14.4 pydantic-core==2.50.5 annotated-types==0.7.0 typing-inspection==0.4.5 typing-extensions==4.16.0
# and carried with the call):
#     bash evidence/gpu/h200-serving/run.sh
# It stays under 8 minutes (the comparison starts no new shape after BUDGET_S and is killed at LIMIT_S) and writes
# to $OUT: compare.json (patterns.core.records.ServingComparison, rewritten after every shape), the best shape's two
# profiler traces (trace-B*-L*-v1.json, trace-B*-L*-live.json; Perfetto), run.log, status.txt and gpu.txt.
# Back here, the committed evidence: python -m patterns.serving.evidence render DIR --out evidence/gpu/h200-serving
#
# The same path on a CPU (the interpreter-sized preset, eager): DEVICE=cpu MODEL=tiny BATCHES=1,2 CONTEXTS=8 \
#     STEPS=2 ROUNDS=2 OUT=/tmp/out bash evidence/gpu/h200-serving/run.sh
set -uo pipefail
: "${OUT:?set OUT to the folder for the results}"
if [ -d .whl ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit
    export PYTHONPATH=/tmp/site
fi
export PYTHONUNBUFFERED=1 COLUMNS=120 PATTERNS_REGISTRY=${PATTERNS_REGISTRY:-$(mktemp -d)/registry}
# installed editable from this tree unless it already is
# (asked from another folder: in this one `import patterns` finds ./patterns without the package mapping)
(here=$PWD; cd / && python3 -c 'import sys, patterns.serving; raise SystemExit(not patterns.serving.__file__.startswith(sys.argv[1] + "/"))' "$here") 2>/dev/null \
    || python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null || exit
DEVICE=${DEVICE:-cuda}
{ nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw,memory.used --format=csv 2>/dev/null || echo "no nvidia-smi"
  git rev-parse HEAD 2>/dev/null; python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__, "cuda", torch.version.cuda)'; } > "$OUT/gpu.txt"
# the agent's accepts replayed into a fresh registry: v2, v3 of each op in the order they were accepted, the last live
python3 -m patterns.serving.evidence register evidence/gpu/h200-agent/agent-home | tee "$OUT/run.log" || exit
patterns serving status > "$OUT/status.txt" 2>&1
timeout "${LIMIT_S:-420}" patterns serving compare --against v1 --model "${MODEL:-h200}" --device "$DEVICE" \
    --batch "${BATCHES:-1,8,32,64}" --context "${CONTEXTS:-4096,32768}" --steps "${STEPS:-16}" --rounds "${ROUNDS:-8}" \
    --checks --budget-s "${BUDGET_S:-300}" --trace "$OUT" --out "$OUT/compare.json" 2>&1 | tee -a "$OUT/run.log"
echo "exit ${PIPESTATUS[0]}" | tee -a "$OUT/run.log"
