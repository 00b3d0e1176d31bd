"""Every upstream location the library cites exists in the pinned upstream wheel.

The wheels come from PyPI (`pip download --no-deps`, cached under the user
cache) and are read in place: the cited path must be in the wheel, the line
range inside the file, and the cited symbol's name in the file at or before the
end of the range (its definition, or the enclosing function's).
"""
from __future__ import annotations

import re
from functools import lru_cache

import pytest

from patterns.core.library import load_library

WHEELS = {("fla", "0.6.0"): "fla-core==0.6.0", ("sglang", "0.5.23"): "sglang==0.5.23", ("deepgemm", "0.2.5"): "sgl-deep-gemm==0.2.5"}
CITES = [(e.id, i, u) for e in load_library() for i, u in enumerate(e.pattern.evidence.upstream)]


@lru_cache(maxsize=None)
def members(project: str, version: str) -> dict:
    from patterns.distill.sources import resolve

    src = resolve(WHEELS[(project, version)])
    return {m.path: m for m in src.members()}


@pytest.mark.slow
@pytest.mark.parametrize(("pattern_id", "i", "loc"), CITES, ids=[f"{p}-{i}" for p, i, _ in CITES])
def test_cited_location_exists(pattern_id, i, loc):
    assert (loc.project, loc.version) in WHEELS, f"{pattern_id}: cites {loc.project} {loc.version}, not a pinned upstream"
    files = members(loc.project, loc.version)
    matches = [p for p in files if p == loc.path or p.endswith("/" + loc.path)]
    assert matches, f"{pattern_id}: {loc.path} is not in {WHEELS[(loc.project, loc.version)]}"
    lines = files[matches[0]].read().decode("utf-8", "replace").splitlines()
    start, end = loc.lines
    assert end <= len(lines), f"{pattern_id}: {loc.path} has {len(lines)} lines, cited {start}-{end}"
    upto = "\n".join(lines[:end])
    names = [n for n in re.split(r"[^A-Za-z0-9_]+", loc.symbol) if len(n) > 2]
    assert any(re.search(rf"\b{re.escape(n)}\b", upto) for n in names), f"{pattern_id}: none of {names} in {loc.path} up to line {end}"
