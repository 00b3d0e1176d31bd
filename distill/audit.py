"""Audit the distiller's detections: random reported locations with their code, for a person to mark.

    python -m patterns.distill.audit --sample 60 [--seed 0] [--format json] [--shares] [SOURCE ...]

A location is reported either by a library pattern's present_when (evidence for
the library) or by a draft's (a technique the library lacks). The sample is
stratified: every pattern and draft with locations gets one before any gets a
second, so rare techniques are audited too. Each item prints the condition's
reason and the code span around the matched line; a person marks whether the
code truly shows the technique (evidence/distill/audit.json records the marks).
`--shares` prints, per pattern and draft, the share of all upstream kernels
(Triton kernels and CUDA __global__ functions) it claims.
"""
from __future__ import annotations

import argparse
import json
import random
import re
import sys
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path


@dataclass
class Item:
    source: str  # library | draft
    pattern: str
    project: str
    path: str
    symbol: str
    lines: tuple[int, int]
    line: int
    reason: str
    code: str = ""


def _matched_line(reason: str, lines: tuple[int, int]) -> int:
    m = re.search(r"\(line (\d+)", reason) or re.search(r"line (\d+)", reason)
    n = int(m.group(1)) if m else lines[0]
    return n if lines[0] <= n <= lines[1] else lines[0]


def collect(result) -> list[Item]:
    """Every reported location: library detections and the locations of proposed drafts."""
    items = [Item("library", h.pattern, h.project, h.path, h.symbol, h.lines, _matched_line((h.reasons or [""])[0], h.lines), (h.reasons or [""])[0])
             for h in result.detections.hits]
    proposed = {d.id for d in result.drafts}
    for m in result.mined:
        for tid, locs in m.hits.items():
            if tid in proposed:
                items += [Item("draft", tid, l.project, l.path, l.symbol, l.lines, l.line, l.reason) for l in locs]
    return items


def sample(items: list[Item], n: int, seed: int) -> list[Item]:
    rng = random.Random(seed)
    by: dict[str, list[Item]] = defaultdict(list)
    for it in items:
        by[f"{it.source}:{it.pattern}"].append(it)
    pools = {k: rng.sample(v, len(v)) for k, v in sorted(by.items())}
    order = sorted(pools)
    rng.shuffle(order)
    out: list[Item] = []
    while len(out) < n and any(pools.values()):
        for k in order:
            if pools[k] and len(out) < n:
                out.append(pools[k].pop())
    return out


def code_span(text: str, item: Item, before: int = 3, after: int = 8) -> str:
    lines = text.splitlines()
    a = max(item.lines[0], item.line - before)
    b = min(item.lines[1], item.line + after, len(lines))
    return "\n".join(f"{i:5d}{'>' if i == item.line else ' '} {lines[i - 1]}" for i in range(a, b + 1))


def shares(result) -> list[tuple[str, int, float]]:
    """(pattern or draft, upstream kernels where it holds, share of all upstream kernels)."""
    kernels = set()
    for res in result.scans:
        for r in res.records:
            if r.py is not None:
                kernels |= {(res.source.project, r.path, k.name) for k in r.py.facts.kernels}
            elif r.native is not None:
                kernels |= {(res.source.project, r.path, f.name) for f in r.native.functions if f.is_kernel}
    claimed: dict[str, set] = defaultdict(set)
    for h in result.detections.hits:
        claimed[h.pattern] |= {(h.project, h.path, h.symbol)} & kernels
    proposed = {d.id for d in result.drafts}
    for m in result.mined:
        for tid, locs in m.hits.items():
            if tid in proposed:
                claimed["draft:" + tid] |= {l.key for l in locs} & kernels
    n = len(kernels)
    return sorted(((k, len(v), len(v) / n if n else 0.0) for k, v in claimed.items()), key=lambda r: (-r[2], r[0]))


def main(argv: list[str] | None = None) -> None:
    from patterns.distill.bench import REQUIREMENTS
    from patterns.distill.cache import FactsCache
    from patterns.distill.run import distill
    from patterns.core.library import load_library

    ap = argparse.ArgumentParser(prog="python -m patterns.distill.audit", description=__doc__.splitlines()[0])
    ap.add_argument("sources", nargs="*", default=REQUIREMENTS, help="as for `patterns distill` (default: the three upstream wheels)")
    ap.add_argument("--sample", type=int, default=60, metavar="N")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--format", choices=["text", "json"], default="text")
    ap.add_argument("--shares", action="store_true", help="print the share of all upstream kernels each pattern and draft claims")
    ap.add_argument("--library", default=None)
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args(argv)

    # the facts come from the cache; the analysis is redone so every record is at hand
    result = distill(args.sources, load_library(Path(args.library) if args.library else None), FactsCache(), jobs=args.jobs, reuse_analysis=False)
    if args.shares:
        for name, n, share in shares(result):
            print(f"{share:7.1%} {n:5d}  {name}")
        return
    picked = sample(collect(result), args.sample, args.seed)
    texts: dict[tuple[str, str], str] = {}
    members = {}
    for res in result.scans:
        for m in res.source.members():
            members[(res.source.project, m.path)] = m
    for it in picked:
        key = (it.project, it.path)
        if key not in texts:
            m = members.get(key)
            texts[key] = m.read().decode("utf-8", "replace") if m is not None else ""
        it.code = code_span(texts[key], it)
    if args.format == "json":
        print(json.dumps([asdict(it) for it in picked], indent=1))
        return
    for i, it in enumerate(picked, 1):
        print(f"## {i}. [{it.source}] {it.pattern}: {it.project} {it.path}:{it.lines[0]}-{it.lines[1]} ({it.symbol})")
        print(f"   reason: {it.reason}")
        print(it.code)
        print()
    counts = Counter(it.source for it in picked)
    print(f"{len(picked)} locations ({counts['library']} library, {counts['draft']} draft); mark each: does the code show the technique?", file=sys.stderr)


if __name__ == "__main__":
    main()
