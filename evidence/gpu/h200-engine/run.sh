#!/usr/bin/env bash
# Engine metrics on the H200 before and after the accepted rewrites go live (issue #7/#8):
# the same generation through the registry's v1 baselines, then with the first session's accepted
# decode_attention (split-KV) and matmul (autotuned, small space) versions promoted (v2), then with
# the later accepted kda_decode (fused+split+hints), decode_attention (split-KV + GQA grouping) and
# matmul (autotuned, Hopper space) versions (v3); nothing else changes.
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 PATTERNS_REGISTRY=/tmp/registry COLUMNS=160
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null || exit
RUNS=evidence/gpu/h200-agent/agent-home/runs
ENGINE="patterns serving engine --device cuda --model small --batch ${BATCH:-8} --prompt-len 16 --steps ${STEPS:-64}"
$ENGINE --impl reference --format json > "$OUT/engine-reference.json"
$ENGINE --impl live --format json > "$OUT/engine-v1.json"
python3 - <<'PY'
from pathlib import Path
from patterns.serving.registry import Registry
reg = Registry()
for op, cand, pattern in [("decode_attention", "decode_attention-20261202T160551485340/candidates/01-split_kv_lse_merge.py", "split_kv_lse_merge"),
                          ("matmul", "matmul-20261202T160920142403/candidates/05-autotune_configs_keys.py", "autotune_configs_keys")]:
    v = reg.register(op, Path("evidence/gpu/h200-agent/agent-home/runs") / cand, symbol=op, pattern=pattern, bundle=None, accepted_by="maintainer")
    reg.promote(op, v.version)
PY
$ENGINE --impl live --format json > "$OUT/engine-v2.json"
python3 - <<'PY'
from pathlib import Path
from patterns.serving.registry import Registry
reg = Registry()
for op, cand, pattern in [("kda_decode", "kda_decode-20261202T174301651968/candidates/01-cache_eviction_hints.py", "cache_eviction_hints"),
                          ("decode_attention", "decode_attention-20261202T174320041183/candidates/01-gqa_head_grouping.py", "gqa_head_grouping"),
                          ("matmul", "matmul-20261202T172148160188/candidates/05-autotune_configs_keys.py", "autotune_configs_keys")]:
    v = reg.register(op, Path("evidence/gpu/h200-agent/agent-home/runs") / cand, symbol=op, pattern=pattern, bundle=None, accepted_by="maintainer")
    reg.promote(op, v.version)
PY
$ENGINE --impl live --format json > "$OUT/engine-v3.json"
$ENGINE --impl live --verify --steps 8 --format json > "$OUT/engine-v3-verify.json"
patterns serving status | tee "$OUT/status.txt"
for f in reference v1 v2 v3 v3-verify; do echo "== $f"; python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print({k: v for k, v in d.items() if not isinstance(v, (list, dict))})" "$OUT/engine-$f.json"; done
