#!/usr/bin/env bash
# The agent on the H200, chained (issue #8, agent-run4.log): a second run starts from the first run's
# candidate, as it would from the merged code once that candidate is accepted.
# Run from the repository root on the GPU machine with OUT set; .whl/ and .gpuindex/ as in run.sh's header
# (the index must also hold the plans of /tmp/kda2/kda_decode.py and /tmp/dec2/decode_attention.py).
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null || exit
export PATTERNS_AGENT_HOME=/tmp/agent PATTERNS_REGISTRY=/tmp/registry COLUMNS=160 PATTERNS_INDEX_DIR=${PATTERNS_INDEX_DIR:-$PWD/.gpuindex}
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv | tee "$OUT/gpu.txt"
A() { echo "=== patterns agent $* --device cuda" | tee -a "$OUT/agent.log"; timeout 220 patterns agent "$@" --device cuda 2>&1 | tee -a "$OUT/agent.log"; echo "exit ${PIPESTATUS[0]}" | tee -a "$OUT/agent.log"; }
# 1. KDA decode from the V-tiled baseline: fuse (slower), then restore the split the fusion undid
A kda_decode --max-steps 3
# 2. from the first run's split_underfilled_grid candidate
CAND=$(python3 -c '
from patterns.agent.review import ReviewStore, agent_home
items = [i for i in ReviewStore(agent_home() / "reviews").list() if i.op == "kda_decode" and i.pattern_id == "split_underfilled_grid"]
print(items[-1].candidate if items else "")')
if [ -n "$CAND" ]; then mkdir -p /tmp/kda2 && cp "$CAND" /tmp/kda2/kda_decode.py && A /tmp/kda2/kda_decode.py --op kda_decode --max-steps 4; fi
# 3. decode attention from the split-KV candidate accepted in the first session
mkdir -p /tmp/dec2 && cp evidence/gpu/h200-decode_attention/candidate-split-KV.py /tmp/dec2/decode_attention.py
A /tmp/dec2/decode_attention.py --op decode_attention --max-steps 3
patterns review list 2>&1 | tee -a "$OUT/agent.log"
tar czf "$OUT/agent-home.tgz" -C /tmp agent registry
