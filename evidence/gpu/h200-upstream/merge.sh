#!/usr/bin/env bash
# Issue #16, back from the H200: the tars of run.sh's calls (upstream-<targets>.tgz) into one report here.
#
#   bash evidence/gpu/h200-upstream/merge.sh DIR/upstream-fla_kda-liger_rope.tgz DIR/upstream-sglang_decode.tgz
#
# Unpacks each tar under /tmp/h200-upstream-merge, joins the agent homes' runs into one, and writes into this
# folder report.json and report.md (python -m patterns.agent.report: the journals name the GPU machine's folders,
# the report reads the bundles under each run's own folder here), agent-<target>.log and gpu.txt of every call
# (gpu-<targets>.txt); the baseline bundles stay in the tars.
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: merge.sh UPSTREAM.tgz..." >&2; exit 2; }
cd "$(git rev-parse --show-toplevel)"
H=${OUTDIR:-evidence/gpu/h200-upstream}  # where the report and the logs go
mkdir -p "$H"
W=${WORK:-/tmp/h200-upstream-merge}
rm -rf "$W"
mkdir -p "$W/all/runs"
declare -A NAME=([fla_kda]=fused_recurrent_kda_fwd [sglang_decode]=decode_attention_fwd [liger_rope]=rope_forward)
declare -A LABEL=(
    [fla_kda]="fla-core 0.6.0 fla/ops/kda/fused_recurrent.py:fused_recurrent_kda_fwd"
    [sglang_decode]="sglang 0.5.23 sglang/kernels/ops/attention/decode_attention.py:decode_attention_fwd"
    [liger_rope]="liger-kernel 0.8.5 liger_kernel/ops/rope.py:rope_forward"
)
args=()
order=()
declare -A BUNDLE=()
for tgz in "$@"; do
    [ -f "$tgz" ] || { echo "$tgz: no such file" >&2; exit 2; }
    tar xzf "$tgz" -C "$W"
    tag=$(basename "$tgz" .tgz)
    [ -d "$W/$tag/agent-home/runs" ] && cp -r "$W/$tag/agent-home/runs/." "$W/all/runs/"
    [ -f "$W/$tag/gpu.txt" ] && cp "$W/$tag/gpu.txt" "$H/gpu-${tag#upstream-}.txt"
    for t in $(echo "${tag#upstream-}" | tr - ' '); do
        [ -f "$W/$tag/agent-$t.log" ] && cp "$W/$tag/agent-$t.log" "$H/agent-$t.log"
        [[ " ${order[*]-} " == *" $t "* ]] || order+=("$t")  # a target of two calls: the later call's run and bundle
        BUNDLE[$t]=$(ls "$W/$tag/baseline-$t"/*.json 2>/dev/null | head -1 || true)
    done
done
for t in "${order[@]}"; do
    args+=(--target "${NAME[$t]}=${LABEL[$t]}" ${BUNDLE[$t]:+--baseline "${NAME[$t]}=${BUNDLE[$t]}"})
done
python -m patterns.agent.report "$W/all" "${args[@]}" --out "$H"
