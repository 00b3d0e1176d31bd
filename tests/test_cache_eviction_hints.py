"""cache_eviction_hints on kernels whose per-token pointers advance in a loop and whose state is updated in place."""
from __future__ import annotations

from pathlib import Path

import pytest

from patterns.core.library import LIBRARY_DIR
from patterns.rewriter.base import RewriteError, apply

ROOT = Path(__file__).resolve().parents[1]
_RECURRENT = (LIBRARY_DIR / "cache_eviction_hints" / "cases" / "recurrent.py").read_text(encoding="utf-8")


def _hints(src: str) -> dict[str, str | None]:
    """`b_x` -> the eviction policy its tl.load got (None: unhinted), for every `b_x = tl.load(...)` line."""
    out = {}
    for line in src.splitlines():
        name, _, rest = line.strip().partition(" = ")
        if rest.startswith(("tl.load(", "tl.exp(tl.load(")):
            out[name] = next((p for p in ("evict_first", "evict_last") if p in rest), None)
    return out


def test_advanced_pointer_is_classified_by_its_first_value():
    got = _hints(apply("cache_eviction_hints", _RECURRENT, "case.py").candidate.source)
    # p_q = q + i_bh * T * K + o_k, then p_q += K: a tile that every V tile (program_id 1) of a head reads
    assert got["b_q"] == "evict_last" and got["b_v"] == "evict_first"


def test_in_place_state_load_is_left_unhinted():
    got = _hints(apply("cache_eviction_hints", _RECURRENT, "case.py").candidate.source)
    assert got["b_h"] is None


def test_a_stride_that_reads_the_program_id_is_not_seen_through():
    src = _RECURRENT.replace("p_q += K", "p_q += K * i_v")
    with pytest.raises(RewriteError, match="no tile load of decay_recurrent_kernel is shared between programs"):
        apply("cache_eviction_hints", src, "case.py")


def test_kda_decode_candidate():
    path = ROOT / "evidence/gpu/h200-kda_decode/candidate-fused-split.py"
    got = _hints(apply("cache_eviction_hints", path.read_text(), str(path)).candidate.source)
    assert got == {"b_h": None, "b_A": None, "b_bias": "evict_last", "b_q": "evict_last", "b_k": "evict_last",
                   "b_g": "evict_last", "b_v": "evict_first", "b_beta": None}


def test_tiles_folded_into_an_axis_count_as_its_own_part(tmp_path):
    """split_underfilled_grid folds the V tiles into axis 0 (`pid // NV`, `pid % NV`): q, k and g read only the
    high part, so every V tile of a head shares them; v reads both parts and is streamed."""
    from patterns import benchmark

    chain = (("fuse_v_tiles", {}), ("split_underfilled_grid", {}))
    src = benchmark.apply_chain("kda_decode", chain, tmp_path / "fused_split.py")
    assert "tl.program_id(0).to(tl.int64) % tl.cdiv(V, BV)" in src
    got = _hints(apply("cache_eviction_hints", src, "fused_split.py").candidate.source)
    assert got == {"b_h": None, "b_A": None, "b_bias": "evict_last", "b_q": "evict_last", "b_k": "evict_last",
                   "b_g": "evict_last", "b_v": "evict_first", "b_beta": None}
    # without the fold, the same kernel on one program per head shares nothing across programs
    with pytest.raises(RewriteError, match="is shared between programs"):
        apply("cache_eviction_hints", benchmark.apply_chain("kda_decode", chain[:1], tmp_path / "fused.py"), "fused.py")
