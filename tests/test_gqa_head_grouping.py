"""gqa_head_grouping on the project's decode attention: the baseline and its split-KV rewrite.

The split-KV then GQA-grouping chain is what runs on the H200, so both rewrites
are checked against the op's reference on its CPU shapes (interpreter, float32
and bfloat16, NaN-filled outputs), and the launcher edits are pinned: the head
axis counts KV heads, the split rule divides by the programs the grid now has,
and the merge kernel keeps one program per query head.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from patterns.core.examples import compare, nan_filled_empty
from patterns.core.ops import load_spec, resolve, source_path
from patterns.rewriter.base import AlreadyApplied, apply
from patterns.validation.loader import load_impl
from patterns.validation.sandbox import InProcess

SPEC = load_spec("decode_attention")
BASELINE = source_path(SPEC, SPEC.baseline).read_text()
SPLIT = apply("split_kv_lse_merge", BASELINE, "baseline.py").candidate.source
CHAINS = {"baseline": BASELINE, "split_kv": SPLIT}


def _kernel_text(source: str, name: str) -> str:
    return re.search(rf"@triton\.jit\ndef {name}\(.*?(?=\n\n\n)", source, re.S).group(0)  # type: ignore[union-attr]


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.mark.parametrize("start", sorted(CHAINS))
def test_grouped_decode_attention_matches_reference(start: str, tmp_path: Path) -> None:
    grouped = apply("gqa_head_grouping", CHAINS[start], "baseline.py").candidate.source
    path = tmp_path / f"grouped_{start}.py"
    path.write_text(grouped)
    host = InProcess("cpu")  # the project's own rewrite of its own baseline: trusted, imported here
    impl, _ = load_impl(SPEC, "candidate", path, host)
    reference = resolve(SPEC, SPEC.reference)
    try:
        for shape in SPEC.shapes:
            for dtype in SPEC.dtypes:
                inputs = SPEC.make_inputs(dict(shape), dtype, 0, "cpu")
                want = reference(**{n: x.clone() if isinstance(x, torch.Tensor) else x for n, x in inputs.items()})
                with nan_filled_empty():
                    got = impl.launcher(**inputs)
                tol = SPEC.tolerance[dtype]
                ok, aerr, rerr, reason = compare(got, want, tol.atol, tol.rtol)
                assert ok, f"{start} {shape} {dtype}: {reason} (max abs err {aerr:.3g}, max rel err {rerr:.3g})"
                assert want[0].abs().max() > 0.1  # a real comparison, not one of zeros
    finally:
        host.close()


def test_split_kv_then_grouping_edits_the_launcher_and_leaves_the_merge() -> None:
    grouped = apply("gqa_head_grouping", SPLIT, "baseline.py").candidate.source
    assert "decode_attention_fwd_kernel[(B * HK, num_splits)](" in grouped
    # the split count sizes itself from the B * HK programs per split the grouped grid has
    assert "triton.cdiv(64 * _num_sms(o.device), B * HK)" in grouped
    # partials stay one row per query head, and so does the merge
    assert "o_part = torch.empty(B * HQ, num_splits, BD" in grouped
    assert "decode_attention_merge_kernel[(B * HQ,)](" in grouped
    assert _kernel_text(grouped, "decode_attention_merge_kernel") == _kernel_text(SPLIT, "decode_attention_merge_kernel")
    fwd = _kernel_text(grouped, "decode_attention_fwd_kernel")
    assert "tl.dot(b_q, tl.trans(b_k))" in fwd and "tl.dot(b_p, b_v)" in fwd
    assert "tl.store(lse_part + o_bhs, b_m + tl.log(b_l), mask=m_g)" in fwd
    with pytest.raises(AlreadyApplied):
        apply("gqa_head_grouping", grouped, "baseline.py", kernel="decode_attention_fwd_kernel")
    # without --kernel too: no kernel of the file takes the pattern, and the one that has it says so
    with pytest.raises(AlreadyApplied):
        apply("gqa_head_grouping", grouped, "baseline.py")
    with pytest.raises(AlreadyApplied):
        apply("split_kv_lse_merge", SPLIT, "baseline.py")
