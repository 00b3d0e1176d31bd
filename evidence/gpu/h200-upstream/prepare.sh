#!/usr/bin/env bash
# Issue #16: the three upstream targets of the H200 run (run.sh beside this file), made HERE, on the CPU.
#
#   bash evidence/gpu/h200-upstream/prepare.sh      # from the repository root; about 3 minutes
#
# Writes only ignored folders, nothing upstream is committed:
#   .upstream/site/     the upstream packages as their wheels hold them (fla-core 0.6.0, liger-kernel 0.8.5) and
#                       the four files of sglang 0.5.23 the decode kernel imports; sglang.srt.utils is replaced by
#                       shims/sglang_srt_utils.py (the real one imports SGLang's whole runtime)
#   .upstream/<target>/ a copy of the kernel file, the project's reference (refs/), and spec.py by `patterns spec init`:
#       fla_kda        fla/ops/kda/fused_recurrent.py:fused_recurrent_kda_fwd (the KDA decode kernel)
#       sglang_decode  sglang/kernels/ops/attention/decode_attention.py:decode_attention_fwd (Triton decode attention)
#       liger_rope    liger_kernel/ops/rope.py:rope_forward (Liger-Kernel's rotary embedding)
#   .upstream/<target>/cpu/  `patterns validate spec.py --device cpu`: the spec, the reference and the upstream kernel
#                       agree on the CPU grid under the interpreter (the gate's baseline-against-itself run)
#   .gpuindex/          the library's index with the query embeddings of the agent's analyses of the three targets
#                       cached (the H200 has neither chromadb nor the embedding model)
#   .whl/               the wheels the H200 lacks (pydantic, platformdirs, libcst, einops, ...), fetched if missing
#   .upstream/STAMP     the digest of what made .upstream/ (stamp.sh): run.sh refuses an .upstream/ made by another
#                       version of this script, its refs, shims or spec init (the H200 run of 2762e8a used one made
#                       before ba5afb1: Liger's q and k still --inplace, and the unmodified kernel failed against itself)
# Carry to the H200: .whl .upstream .gpuindex
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
H=evidence/gpu/h200-upstream
U=.upstream
WHEELS=${WHEELS:-/work/wheels}
PY=${PY:-python}
PATTERNS=${PATTERNS:-patterns}
export TRITON_INTERPRET=1 HF_HUB_OFFLINE=${HF_HUB_OFFLINE:-1} FLA_DISABLE_BACKEND_DISPATCH=1

wheel() {  # the one wheel of $1 in $WHEELS, fetched with pip when absent
    local found
    found=$(ls "$WHEELS"/"$1"-*.whl 2>/dev/null | head -1)
    if [ -z "$found" ]; then
        "$PY" -m pip download -q --no-deps --only-binary=:all: -d "$WHEELS" "$2" >&2
        found=$(ls "$WHEELS"/"$1"-*.whl | head -1)
    fi
    echo "$found"
}
FLA=$(wheel fla_core fla-core==0.6.0)
SGL=$(wheel sglang sglang==0.5.23)
LIGER=$(wheel liger_kernel liger-kernel==0.8.5)

rm -rf "$U"
mkdir -p "$U/site"
unzip -q -o "$FLA" 'fla/*' -d "$U/site"
unzip -q -o "$LIGER" 'liger_kernel/*' -d "$U/site"
unzip -q -o "$SGL" sglang/kernels/ops/attention/decode_attention.py sglang/kernels/ops/attention/score_mod.py \
    sglang/srt/environ.py -d "$U/site"
# package scaffolding for that subset (the wheel's __init__ files import the rest of SGLang)
for d in sglang sglang/kernels sglang/kernels/ops sglang/kernels/ops/attention sglang/srt; do : > "$U/site/$d/__init__.py"; done
mkdir -p "$U/site/sglang/srt/utils"
cp "$H/shims/sglang_srt_utils.py" "$U/site/sglang/srt/utils/__init__.py"
find "$U/site" -name '*.so' -delete
export PYTHONPATH=$PWD/$U/site${PYTHONPATH:+:$PYTHONPATH}

# einops: fla imports it (the wheels of .whl/ are installed on the H200 before anything runs)
mkdir -p .whl
for spec in pydantic==2.14.4 pydantic-core==2.50.5 annotated-types==0.7.0 typing-inspection==0.4.5 typing-extensions==4.16.0 \
            platformdirs libcst einops; do
    name=$(echo "${spec%%==*}" | tr - _)
    ls .whl/"$name"-*.whl >/dev/null 2>&1 || "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
        --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
        -d .whl "$spec"
done
"$PY" -c 'import einops' 2>/dev/null || "$PY" -m pip install -q --no-deps --target "$U/site" .whl/einops-*.whl

mkdir -p "$U/fla_kda" "$U/sglang_decode" "$U/liger_rope"
cp "$U/site/fla/ops/kda/fused_recurrent.py" "$U/fla_kda/fused_recurrent.py"
cp "$U/site/sglang/kernels/ops/attention/decode_attention.py" "$U/sglang_decode/decode_attention.py"
cp "$U/site/liger_kernel/ops/rope.py" "$U/liger_rope/rope.py"
cp "$H/refs/fla_kda_ref.py" "$U/fla_kda/"
cp "$H/refs/sglang_decode_ref.py" "$U/sglang_decode/"
cp "$H/refs/liger_rope_ref.py" "$U/liger_rope/"

# FLA: decode (T=1) of Kimi-Linear-sized heads, 32 heads of 128 x 128 state, batch 1, 32, 128, 512; the gate, the L2 norm
# of q and k and beta's sigmoid in the kernel, the state updated in place (what a served model calls)
"$PATTERNS" spec init "$U/fla_kda/fused_recurrent.py" --kernel fused_recurrent_kda_fwd --reference-file "$U/fla_kda/fla_kda_ref.py" \
    --shape q=B,T,H,K --shape k=B,T,H,K --shape v=B,T,HV,V --shape g=B,T,HV,K --shape beta=B,T,HV \
    --shape A_log=HV --shape 'dt_bias=HV*K' --shape initial_state=B,HV,K,V \
    --dtype A_log=float32 --dtype dt_bias=float32 --dtype initial_state=float32 \
    --value use_qk_l2norm_in_kernel=True --value use_gate_in_kernel=True --value use_beta_sigmoid_in_kernel=True \
    --inplace initial_state --dtype float32 --dtype bfloat16 --gpu-dtype bfloat16 \
    --cpu-shape B=1,T=1,H=2,HV=2,K=64,V=64 --cpu-shape B=3,T=1,H=1,HV=3,K=33,V=63 \
    --cpu-shape B=1,T=4,H=2,HV=4,K=16,V=45 --cpu-shape B=1,T=7,H=3,HV=3,K=48,V=32 \
    $(for B in 1 32 256; do echo --gpu-shape B=$B,T=1,H=32,HV=32,K=128,V=128; done) --force

# SGLang: GQA decode (32 query heads, 8 KV heads of 128, Llama-3-8B's), 8 KV splits: contexts of 4k at batch 1 and 32,
# and of 32k at batch 8 (a pool of B*S slots: at batch 32 and 32k it is 4 GiB, written to the gate's child in a file
# for every timed validation);
# inputs from the reference file (the token pool and kv_indptr / kv_indices); fp32 on the CPU (the interpreter does
# not emulate bf16 tl.dot), bf16 on the GPU. Its GQA stage 1 rounds the softmax weights to bf16 for the P.V
# tensor-core dot off AMD's gfx1250 (`acc += tl.dot(p.to(v.dtype), v)`, decode_attention.py lines 754-762, where
# SGLang's comment names that downcast as the accuracy loss vs an fp32 reference): its sums are declared at bf16
# precision (--accumulation bfloat16). Held to fp32 accumulation against the float64 reference, the unmodified kernel
# is 29-73x over the bound on the bf16 grid (p rounded to bf16 in float64 arithmetic; 0.015x with bfloat16 declared);
# the per-dtype tolerance is checked as before
"$PATTERNS" spec init "$U/sglang_decode/decode_attention.py" --kernel decode_attention_fwd \
    --reference-file "$U/sglang_decode/sglang_decode_ref.py:decode_attention_fwd" \
    --inplace o --scratch attn_logits --scratch attn_lse --dtype float32 --gpu-dtype bfloat16 --accumulation bfloat16 \
    --cpu-shape B=2,S=70,HQ=8,HK=2,D=64,SPLITS=4 --cpu-shape B=1,S=37,HQ=4,HK=4,D=32,SPLITS=4 \
    --cpu-shape B=3,S=33,HQ=16,HK=1,D=16,SPLITS=8 \
    --gpu-shape B=1,S=4096,HQ=32,HK=8,D=128,SPLITS=8 --gpu-shape B=32,S=4096,HQ=32,HK=8,D=128,SPLITS=8 \
    --gpu-shape B=8,S=32768,HQ=32,HK=8,D=128,SPLITS=8 --force

# Liger: RoPE of Llama-3-8B's attention (32 query and 8 KV heads of 128), prefill of 8k tokens, 4 x 4k, and a decode
# step of 256 sequences; cos and sin in fp32 (the kernel computes in their dtype). Where their layout already is the
# kernel's (a single head, T=1) the launcher rotates q and k in their own memory and returns views of it: the gate
# compares what it returns, and their memory is declared --scratch (written, not compared). q and k are drawn as HF
# attention hands them, [B, H, T, D] views of [B, T, H, D] memory (--storage): the launcher's transpose back relies on
# it, and a contiguous [B, H, 1, D] (the first H200 run's inputs) gives it rows D apart at T=1, which it rotates several
# times over (the unmodified kernel failed its own timed-output check at B=256, T=1). The CPU grid has a T=1 shape. Liger's GLU kernels do not run
# under the interpreter (swiglu calls .to() on a float argument, geglu's tanh is libdevice), so the CPU grid could not
"$PATTERNS" spec init "$U/liger_rope/rope.py" --kernel rope_forward --reference-file "$U/liger_rope/liger_rope_ref.py" \
    --shape q=B,HQ,T,D --shape k=B,HK,T,D --shape cos=T,D --shape sin=T,D --dtype cos=float32 --dtype sin=float32 \
    --scratch q --scratch k --storage q=B,T,HQ,D --storage k=B,T,HK,D \
    --cpu-shape B=1,HQ=3,HK=1,T=5,D=16 --cpu-shape B=2,HQ=4,HK=2,T=7,D=32 --cpu-shape B=1,HQ=7,HK=7,T=3,D=64 --cpu-shape B=3,HQ=4,HK=2,T=1,D=16 \
    --gpu-shape B=1,HQ=32,HK=8,T=8192,D=128 --gpu-shape B=4,HQ=32,HK=8,T=4096,D=128 --gpu-shape B=256,HQ=32,HK=8,T=1,D=128 --force

for t in fla_kda sglang_decode liger_rope; do  # exit 1 (a failing check) stops here, with the table
    echo "=== patterns validate $U/$t/spec.py --device cpu"
    COLUMNS=200 "$PATTERNS" validate "$U/$t/spec.py" --device cpu --out "$U/$t/cpu" 2>/dev/null | tail -n 1
done

# the index, and the query embeddings of the analyses the agent makes on the H200 (same files, same shapes)
export PATTERNS_INDEX_DIR=$PWD/.gpuindex
"$PY" - <<'EOF'
from patterns.agent.loop import AgentConfig, make_plan, resolve_target
from patterns.core.ops import load_spec

for t in ("fla_kda", "sglang_decode", "liger_rope"):
    op, path = resolve_target(f".upstream/{t}/spec.py")
    plan = make_plan(AgentConfig(op=op, target=path, device="cuda"), load_spec(op))
    print(f"{t}: planned {[p['pattern_id'] for p in plan['planned']]}, by hand {plan['by_hand']}")
EOF
bash "$H/stamp.sh" > "$U/STAMP"
du -sh .whl .upstream .gpuindex
