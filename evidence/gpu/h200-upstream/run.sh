#!/usr/bin/env bash
# Issue #16: `patterns agent` on three real upstream kernels on one H200, each copied out of its wheel with a spec
# made by `patterns spec init` (prepare.sh, run HERE first, makes .upstream/, .gpuindex/ and .whl/):
#   fla_kda        fla-core 0.6.0 fla/ops/kda/fused_recurrent.py:fused_recurrent_kda_fwd (KDA decode)
#   sglang_decode  sglang 0.5.23 sglang/kernels/ops/attention/decode_attention.py:decode_attention_fwd
#   liger_rope     liger-kernel 0.8.5 liger_kernel/ops/rope.py:rope_forward
# One command, from the repository root on the GPU machine, with OUT set, carrying .whl .upstream .gpuindex:
#     bash evidence/gpu/h200-upstream/run.sh
# Per target: the unmodified kernel validated against itself (the gate's checks of upstream on the GPU and the
# timing's noise floor), then `patterns agent SPEC --device cuda` (every candidate validated against the unmodified
# copy: correctness on the GPU, partition, integrity, and the speed ratio from both interleaved in one process,
# CUDA graphs, L2 flushed before every launch, bootstrap 95% intervals), then the report: the chain the agent reached,
# the checks, the ratios, and "nothing helps" with the layer the feedback pointed at where nothing did.
# Writes to $OUT: report.json, report.md (python -m patterns.agent.report), agent-<target>.log, baseline-<target>/,
# gpu.txt and agent-home.tgz (the runs: journals, candidates, bundles; the review items). Under 10 minutes:
# per target at most PER_BASELINE (default 60) + PER_TARGET (default 120) seconds, MAX_STEPS attempts (default 3);
# for more steps, two calls: TARGETS="fla_kda sglang_decode" MAX_STEPS=4 ..., then TARGETS=liger_rope ...
# Back here: tar xzf agent-home.tgz, then commit report.json / report.md under evidence/gpu/h200-upstream/.
#
# The same path on a CPU (the interpreter; no speed): DEVICE=cpu SHAPES=1 MAX_STEPS=1 OUT=/tmp/out bash evidence/gpu/h200-upstream/run.sh
set -uo pipefail
: "${OUT:?set OUT to the folder for the results}"
[ -d .upstream ] || { echo "no .upstream/: run evidence/gpu/h200-upstream/prepare.sh first (here, not on the GPU)"; exit 2; }
if [ -d .whl ] && [ "${DEVICE:-cuda}" != cpu ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit
    export PYTHONPATH=/tmp/site
fi
export PYTHONPATH=$PWD/.upstream/site${PYTHONPATH:+:$PYTHONPATH}
# FLA's dispatcher may hand a call to another backend: the kernel of the file is what is measured
export PYTHONUNBUFFERED=1 COLUMNS=160 FLA_DISABLE_BACKEND_DISPATCH=1
export PATTERNS_AGENT_HOME=${PATTERNS_AGENT_HOME:-/tmp/agent-upstream} PATTERNS_REGISTRY=${PATTERNS_REGISTRY:-/tmp/registry-upstream}
# the machine has neither chromadb nor the embedding model: the retriever reads the index prepare.sh built, whose
# query embeddings were cached for these analyses
export PATTERNS_INDEX_DIR=${PATTERNS_INDEX_DIR:-$PWD/.gpuindex}
(here=$PWD; cd / && python3 -c 'import sys, patterns.agent; raise SystemExit(not patterns.agent.__file__.startswith(sys.argv[1] + "/"))' "$here") 2>/dev/null \
    || python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null || exit
DEVICE=${DEVICE:-cuda}
mkdir -p "$OUT"
{ nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw,memory.used --format=csv 2>/dev/null || echo "no nvidia-smi"
  git rev-parse HEAD 2>/dev/null; python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__, "cuda", torch.version.cuda)'; } > "$OUT/gpu.txt"

declare -A LABEL=(
    [fla_kda]="fla-core 0.6.0 fla/ops/kda/fused_recurrent.py:fused_recurrent_kda_fwd"
    [sglang_decode]="sglang 0.5.23 sglang/kernels/ops/attention/decode_attention.py:decode_attention_fwd"
    [liger_rope]="liger-kernel 0.8.5 liger_kernel/ops/rope.py:rope_forward"
)
args=()
for t in ${TARGETS:-fla_kda sglang_decode liger_rope}; do
    spec=.upstream/$t/spec.py
    name=$(python3 -c 'import sys; from patterns.core.ops import load_spec; print(load_spec(sys.argv[1]).name)' "$spec") || exit
    echo "=== $t: patterns validate $spec --device $DEVICE (the unmodified kernel against itself)" | tee -a "$OUT/agent-$t.log"
    timeout "${PER_BASELINE:-60}" patterns validate "$spec" --device "$DEVICE" --out "$OUT/baseline-$t" 2>&1 | tail -n 25 | tee -a "$OUT/agent-$t.log"
    echo "=== $t: patterns agent $spec --device $DEVICE --max-steps ${MAX_STEPS:-3}" | tee -a "$OUT/agent-$t.log"
    timeout "${PER_TARGET:-120}" patterns agent "$spec" --device "$DEVICE" --max-steps "${MAX_STEPS:-3}" ${SHAPES:+--shapes $SHAPES} \
        2>&1 | tee -a "$OUT/agent-$t.log"
    echo "exit ${PIPESTATUS[0]}" | tee -a "$OUT/agent-$t.log"
    bundle=$(ls "$OUT/baseline-$t"/*.json 2>/dev/null | head -1)
    args+=(--target "$name=${LABEL[$t]}" ${bundle:+--baseline "$name=$bundle"})
done
python3 -m patterns.agent.report "$PATTERNS_AGENT_HOME" "${args[@]}" --out "$OUT" | tee "$OUT/report.log"
patterns review list --status all 2>&1 | tee -a "$OUT/report.log"
tar czf "$OUT/agent-home.tgz" -C "$(dirname "$PATTERNS_AGENT_HOME")" "$(basename "$PATTERNS_AGENT_HOME")"
