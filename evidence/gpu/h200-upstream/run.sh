#!/usr/bin/env bash
# Issue #16: `patterns agent` on three real upstream kernels on one H200, each copied out of its wheel with a spec
# made by `patterns spec init` (prepare.sh, run HERE first, makes .upstream/, .gpuindex/ and .whl/):
#   fla_kda        fla-core 0.6.0 fla/ops/kda/fused_recurrent.py:fused_recurrent_kda_fwd (KDA decode)
#   sglang_decode  sglang 0.5.23 sglang/kernels/ops/attention/decode_attention.py:decode_attention_fwd
#   liger_rope     liger-kernel 0.8.5 liger_kernel/ops/rope.py:rope_forward
# Per target: the unmodified kernel validated against itself (the gate's checks of upstream on the GPU and the
# timing's noise floor), then `patterns agent SPEC --device cuda` (every candidate validated against the unmodified
# copy: correctness on the GPU, partition, integrity, and the speed ratio from both interleaved in one process,
# CUDA graphs, L2 flushed before every launch, bootstrap 95% intervals), then the report: the chain the agent reached,
# the checks, the ratios, and "nothing helps" with the layer the feedback pointed at where nothing did.
#
# The GPU run is two calls (each at most 10 minutes of wall time), from the repository root, carrying
# .whl .upstream .gpuindex, with OUT set by the device:
#     TARGETS="fla_kda liger_rope" MAX_STEPS=4 PER_BASELINE=90 PER_TARGET=170 bash evidence/gpu/h200-upstream/run.sh
#     TARGETS=sglang_decode MAX_STEPS=8 PER_BASELINE=90 PER_TARGET=420 bash evidence/gpu/h200-upstream/run.sh
# FLA has 4 planned attempts (2 refused by their codemods without a validation) and Liger 2 (one refused), so the
# first call holds both; SGLang has 13 planned and gets the second call alone. In the last H200 run SGLang's baseline
# validation (4 GPU shapes timed) finished within its 60 s, and the agent's 100 s held the probe, the plan, one timed
# validation and part of a second: about a minute a validation, most of it compiling. The candidate is a new file, so
# Triton compiles it (the baseline comes from Triton's cache after the first validation) for
# every kernel variant the gate runs (the 3 CPU-grid shapes, the GPU shapes, the fresh-shape and non-default-args
# probes), and the timed inputs go to the gate's child in a file (SGLang's KV pool: B*S slots); prepare.sh keeps 3
# GPU shapes per target (SGLang's largest is 32k tokens at batch 8, 1 GiB of pool, not batch 32, 4 GiB). The
# correctness grid is not cut (SHAPES is for the CPU path only).
# Each call stops itself within BUDGET seconds (default 550): a target's limits are cut to what is left, less
# RESERVE (default 25) for the report and the tar.
#
# What comes back (the device returns at most 8 files, named in letters, digits, ".", "_" and "-" only): $OUT/upstream-<targets>.tgz, ONE tar of everything --
# report.json, report.md, report.log, gpu.txt, agent-<target>.log, baseline-<target>/ (the bundles of the unmodified
# kernel against itself) and agent-home/ (runs: journals, candidates, bundles; reviews) -- rewritten after every
# target, so a call cut short still returns what was done; and $OUT/report-<targets>.md, the report alone.
# Back here, both calls into one report (this folder's report.json, report.md, agent-<target>.log, gpu-*.txt):
#     bash evidence/gpu/h200-upstream/merge.sh FILES_AT/upstream-fla_kda-liger_rope.tgz FILES_AT/upstream-sglang_decode.tgz
#
# Before the GPU calls, here, in the checkout they carry (a refusal there costs a machine start):
#     CHECK_ONLY=1 OUT=/tmp/check bash evidence/gpu/h200-upstream/run.sh    # "ready: ..." or what to re-make
#
# The same path on a CPU (the interpreter; no speed), about 3 minutes:
#     DEVICE=cpu SHAPES=1 MAX_STEPS=3 PER_BASELINE=300 PER_TARGET=600 BUDGET=3000 OUT=/tmp/out bash evidence/gpu/h200-upstream/run.sh
set -uo pipefail
: "${OUT:?set OUT to the folder for the results}"
[ -d .upstream ] || { echo "no .upstream/: run evidence/gpu/h200-upstream/prepare.sh first (here, not on the GPU)"; exit 2; }
want=$(bash evidence/gpu/h200-upstream/stamp.sh) || exit 2
have=$(cat .upstream/STAMP 2>/dev/null || echo none)
if [ "$have" != "$want" ]; then
    echo ".upstream/STAMP: made by another prepare.sh, refs, shims or spec init (stamp $have, this checkout's $want): run evidence/gpu/h200-upstream/prepare.sh again and carry its .upstream/"
    exit 2
fi
deadline=$((SECONDS + ${BUDGET:-550}))
limit() {  # seconds for the next step: $1, or what is left before the deadline less the reserve
    local l=$((deadline - SECONDS - ${RESERVE:-25}))
    [ "$l" -lt "$1" ] && echo "$l" || echo "$1"
}
if [ -d .whl ] && [ "${DEVICE:-cuda}" != cpu ] && [ -z "${CHECK_ONLY:-}" ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit
    export PYTHONPATH=/tmp/site
fi
export PYTHONPATH=$PWD/.upstream/site${PYTHONPATH:+:$PYTHONPATH}
# FLA's dispatcher may hand a call to another backend: the kernel of the file is what is measured
export PYTHONUNBUFFERED=1 COLUMNS=160 FLA_DISABLE_BACKEND_DISPATCH=1
TARGETS=${TARGETS:-fla_kda sglang_decode liger_rope}
tag=upstream-$(echo $TARGETS | tr ' ' -)
RES=${RES:-/tmp/h200-upstream}/$tag  # everything the tar holds
rm -rf "$RES"
mkdir -p "$RES" "$OUT"
export PATTERNS_AGENT_HOME=$RES/agent-home PATTERNS_REGISTRY=${PATTERNS_REGISTRY:-/tmp/registry-upstream}
# the machine has neither chromadb nor the embedding model: the retriever reads the index prepare.sh built, whose
# query embeddings were cached for these analyses
export PATTERNS_INDEX_DIR=${PATTERNS_INDEX_DIR:-$PWD/.gpuindex}
[ -n "${CHECK_ONLY:-}" ] || (here=$PWD; cd / && python3 -c 'import sys, patterns.agent; raise SystemExit(not patterns.agent.__file__.startswith(sys.argv[1] + "/"))' "$here") 2>/dev/null \
    || python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null || exit
DEVICE=${DEVICE:-cuda}
# the plans the agent will make, here and now: an index made for another library or facts code, or an analysis
# whose query embedding prepare.sh did not cache, needs chromadb or the encoder, which this machine lacks
# (CHECK_ONLY=1, here before a GPU call: the same plans with chromadb and the encoder out of reach, as there, and stop)
python3 - "$TARGETS" "${CHECK_ONLY:-}" <<'EOF' || exit 2
import sys

if sys.argv[2]:
    sys.modules["chromadb"] = sys.modules["patterns.retriever.embedding"] = None  # an import of either fails
from patterns.agent.loop import AgentConfig, make_plan, resolve_target
from patterns.core.ops import load_spec

for t in sys.argv[1].split():
    try:
        op, path = resolve_target(f".upstream/{t}/spec.py")
        make_plan(AgentConfig(op=op, target=path, device="cuda"), load_spec(op))
    except Exception as exc:  # noqa: BLE001 - one line, then no GPU time is spent
        sys.exit(f".gpuindex/: the agent cannot plan {t} with it here ({type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''}): run evidence/gpu/h200-upstream/prepare.sh again and carry its .gpuindex/")
EOF
[ -n "${CHECK_ONLY:-}" ] && { echo "ready: .upstream/STAMP $want, and .gpuindex/ plans $TARGETS without chromadb or the encoder"; exit 0; }
{ nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw,memory.used --format=csv 2>/dev/null || echo "no nvidia-smi"
  git rev-parse HEAD 2>/dev/null || echo "stamp $want"; python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__, "cuda", torch.version.cuda)'; } > "$RES/gpu.txt"

declare -A LABEL=(
    [fla_kda]="fla-core 0.6.0 fla/ops/kda/fused_recurrent.py:fused_recurrent_kda_fwd"
    [sglang_decode]="sglang 0.5.23 sglang/kernels/ops/attention/decode_attention.py:decode_attention_fwd"
    [liger_rope]="liger-kernel 0.8.5 liger_kernel/ops/rope.py:rope_forward"
)
args=()
pack() {  # the report of what is done so far, and the one tar (written aside, then renamed)
    python3 -m patterns.agent.report "$PATTERNS_AGENT_HOME" "${args[@]}" --out "$RES" > "$RES/report.log" 2>&1
    patterns review list --status all >> "$RES/report.log" 2>&1
    tar czf "$OUT/.$tag.tgz" -C "$(dirname "$RES")" "$tag" && mv -f "$OUT/.$tag.tgz" "$OUT/$tag.tgz"
    [ -f "$RES/report.md" ] && cp -f "$RES/report.md" "$OUT/report-${tag#upstream-}.md"
}
for t in $TARGETS; do
    spec=.upstream/$t/spec.py
    log=$RES/agent-$t.log
    name=$(python3 -c 'import sys; from patterns.core.ops import load_spec; print(load_spec(sys.argv[1]).name)' "$spec") || exit
    s=$(limit "${PER_BASELINE:-75}")
    if [ "$s" -gt 10 ]; then
        echo "=== $t: patterns validate $spec --device $DEVICE (the unmodified kernel against itself; limit ${s} s)" | tee -a "$log"
        timeout "$s" patterns validate "$spec" --device "$DEVICE" --out "$RES/baseline-$t" 2>&1 | tail -n 25 | tee -a "$log"
    fi
    s=$(limit "${PER_TARGET:-170}")
    if [ "$s" -gt 10 ]; then
        echo "=== $t: patterns agent $spec --device $DEVICE --max-steps ${MAX_STEPS:-3} (limit ${s} s)" | tee -a "$log"
        timeout "$s" patterns agent "$spec" --device "$DEVICE" --max-steps "${MAX_STEPS:-3}" ${SHAPES:+--shapes $SHAPES} 2>&1 | tee -a "$log"
        echo "exit ${PIPESTATUS[0]}" | tee -a "$log"
    else
        echo "=== $t: not run (the call's budget is spent)" | tee -a "$log"
    fi
    bundle=$(ls "$RES/baseline-$t"/*.json 2>/dev/null | head -1)
    args+=(--target "$name=${LABEL[$t]}" ${bundle:+--baseline "$name=$bundle"})
    pack
done
cat "$RES/report.log"
ls -la "$OUT"
