#!/usr/bin/env bash
# The agent on the H200 (issue #8): one run per op of kernels/, review items left
# queued for a person, then the GIL case (reference case 2) on this host's cores.
# Run from the repository root on the GPU machine with OUT set to a results folder;
# the wheels the machine lacks are in .whl/ (see the device notes in README).
# The machine has neither chromadb nor the embedding model: build .gpuindex here first, where both are,
# with the same analyses the agent makes there (its query embeddings are then cached in it):
#   PATTERNS_INDEX_DIR=.gpuindex python -c 'from patterns.agent.loop import *; from patterns.validation.loader import load_spec
#   for op in ["cp_state_merge", "decode_attention", "kda_decode", "matmul"]:
#       n, t = resolve_target(op); make_plan(AgentConfig(op=n, target=t, device="cuda"), load_spec(n))'
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null || exit
export PATTERNS_AGENT_HOME=/tmp/agent PATTERNS_REGISTRY=/tmp/registry COLUMNS=160
# the machine has neither chromadb nor the embedding model: the retriever reads a
# prebuilt index whose query embeddings were cached here for the same analyses
export PATTERNS_INDEX_DIR=${PATTERNS_INDEX_DIR:-$PWD/.gpuindex}
# an earlier call's runs and review items (resumed, not repeated) when carried in .agenthome/
[ -f .agenthome/agent-home.tgz ] && tar xzf .agenthome/agent-home.tgz -C /tmp
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv | tee "$OUT/gpu.txt"
PER_OP=${PER_OP:-110}
for op in ${OPS:-cp_state_merge decode_attention kda_decode matmul}; do
    echo "=== patterns agent $op --device cuda --max-steps ${MAX_STEPS:-3}" | tee -a "$OUT/agent.log"
    timeout "$PER_OP" patterns agent "$op" --device cuda --max-steps ${MAX_STEPS:-3} 2>&1 | tee -a "$OUT/agent.log"
    echo "exit ${PIPESTATUS[0]}" | tee -a "$OUT/agent.log"
done
patterns review list 2>&1 | tee -a "$OUT/agent.log"
if [ "${GIL:-1}" = 1 ]; then
    mkdir -p /tmp/gil && cp serving/prefill.py /tmp/gil/prefill.py
    patterns apply release_gil_native_wait /tmp/gil/prefill.py --write >/dev/null
    timeout 90 patterns serving prefill --impl serving/prefill.py --impl /tmp/gil/prefill.py --device cuda \
        --trace "$OUT/gil-trace.json" 2>&1 | tee "$OUT/gil.log"
fi
tar czf "$OUT/agent-home.tgz" -C /tmp $(cd /tmp && ls -d agent registry 2>/dev/null)
