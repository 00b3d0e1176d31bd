#!/usr/bin/env bash
# Issue #18 on one H200: the agent over three ops (matmul, rmsnorm_gate, kda_decode; --max-steps 3) run twice from
# fresh homes and cold Triton caches: plain (validations one after another in the agent's process) and fanned out
# as Ray tasks on a Ray head started here with the one GPU (each task asks for num_gpus=1, so one at a time):
# the same candidates and verdicts, the wall time of each, and each task's time from submission to result.
#
# One command, from the repository root on the GPU machine, with OUT set, and three ignored folders carried:
#   .ray/      ray-2.60.0-cp312-cp312-manylinux2014_x86_64.whl (pruned is fine: `ray start --head` needs the GCS,
#              raylet, autoscaler monitor, log monitor, client server and runtime-env/dashboard agents; no dashboard UI)
#   .whl/      23 wheels (8.2 MB), fetched here in the repository root with
#       python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#         --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .whl \
#         pydantic==2.14.4 pydantic-core==2.50.5 annotated-types==0.7.0 typing-inspection==0.4.5 typing-extensions==4.16.0 \
#         platformdirs==4.14.9 libcst==1.9.0 pyyaml==6.0.3 \
#         click==8.5.1 filelock==4.3.2 jsonschema==4.26.0 jsonschema-specifications==2025.9.1 referencing==0.37.0 \
#         rpds-py==0.30.0 attrs==26.1.0 msgpack==1.2.4 packaging==26.2 protobuf==7.36.2 requests==2.34.2 \
#         charset-normalizer==3.4.7 idna==3.20 urllib3==2.8.0 certifi==2026.5.20
#              (the first eight: patterns; the rest: ray 2.60.0's requirements)
#   .gpuindex/ the library index with the three plans' query embeddings cached (the machine has neither chromadb nor
#              the embedding model), built here in the repository root with
#       PATTERNS_INDEX_DIR=.gpuindex python -m patterns.agent.fanout_bench --plan-only --device cuda --targets matmul rmsnorm_gate kda_decode
#              (1.6 MB; the plans are made for --arch h200 whatever the device, so the GPU run asks the same queries)
# then:
#     OUT=/path/to/results bash evidence/gpu/h200-fanout/run.sh
# It stays under 9.5 minutes (LIMIT_S) and writes to $OUT: bench.json, bench.md (rewritten after each configuration),
# run.log and gpu.txt. Back here: copy bench.json, bench.md and gpu.txt into evidence/gpu/h200-fanout/.
#
# The same path on a CPU (interpreter, a custom resource instead of the GPU):
#     DEVICE=cpu OUT=/tmp/out bash evidence/gpu/h200-fanout/run.sh
set -uo pipefail
: "${OUT:?set OUT to the folder for the results}"
mkdir -p "$OUT"
wheels=$(ls .ray/*.whl .whl/*.whl 2>/dev/null)
if [ -n "$wheels" ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site $wheels || exit
    export PYTHONPATH=/tmp/site
fi
python3 -c 'import ray, pydantic, platformdirs, libcst' || { echo "missing wheels: see the head of this script" >&2; exit 2; }
export PYTHONUNBUFFERED=1 COLUMNS=120 RAY_USAGE_STATS_ENABLED=0
# installed editable from this tree unless it already is
# (asked from another folder: in this one `import patterns` finds ./patterns without the package mapping)
(here=$PWD; cd / && python3 -c 'import sys, patterns.agent; raise SystemExit(not patterns.agent.__file__.startswith(sys.argv[1] + "/"))' "$here") 2>/dev/null \
    || python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null || exit
[ -d .gpuindex ] && export PATTERNS_INDEX_DIR=${PATTERNS_INDEX_DIR:-$PWD/.gpuindex}
DEVICE=${DEVICE:-cuda}
[ "$DEVICE" = cpu ] && export TRITON_INTERPRET=1
{ nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw,memory.used --format=csv 2>/dev/null || echo "no nvidia-smi"
  git rev-parse HEAD 2>/dev/null
  python3 -c 'import torch, triton, ray; print("torch", torch.__version__, "triton", triton.__version__, "cuda", torch.version.cuda, "ray", ray.__version__)'
  nproc; } > "$OUT/gpu.txt" 2>&1
timeout "${LIMIT_S:-560}" python3 -m patterns.agent.fanout_bench --device "$DEVICE" --workers "${WORKERS:-1}" \
    --targets ${TARGETS:-matmul rmsnorm_gate kda_decode} --max-steps "${MAX_STEPS:-3}" ${SHAPES:+--shapes $SHAPES} \
    --out "$OUT" 2>&1 | tee "$OUT/run.log"
echo "exit ${PIPESTATUS[0]}" | tee -a "$OUT/run.log"
