"""`patterns skill export DIR`: the library as an agent skill (a SKILL.md with reference files).

    DIR/SKILL.md               frontmatter (name, description); when to use it; the
                               bottleneck → technique map; how to call patterns
    DIR/references/<id>.md     one per pattern: its catalog page as Markdown
    DIR/decision_table.json    one row per pattern: when it applies, when it is
                               already present, its safety and rewrite

Everything is generated from the library, so the skill says what `patterns show`
and the catalog say. Output is byte-reproducible: no timestamps, patterns in id
order. DIR is written whole (built beside it, swapped in at the end) and only
an empty folder or an earlier export is ever replaced.
"""
from __future__ import annotations

import json
from pathlib import Path

import yaml
from jinja2 import Environment, FileSystemLoader, StrictUndefined

from patterns.catalog import describe_arch, describe_shape, pattern_markdown, table_cell
from patterns.core.files import write_folder
from patterns.core.library import Entry
from patterns.core.schema import BottleneckClass

NAME = "triton-kernel-patterns"
MARKER = ".patterns-skill"  # written into every export; only such a folder is ever replaced
TEMPLATES_DIR = Path(__file__).parent / "skill_templates"
DECISION_TABLE = "decision_table.json"


def description(entries: list[Entry]) -> str:
    """The frontmatter description: what the skill does and when to use it (the agent reads only this up front)."""
    return (
        f"Proven optimization techniques for Triton GPU kernels ({len(entries)} patterns distilled from SGLang, "
        "Flash Linear Attention and DeepGEMM), with the tools to apply them: diagnose a kernel's bottleneck "
        "(memory, compute, occupancy, launch, host or numerics), pick the pattern that fits, apply its rewrite "
        "as a reviewable diff and validate the result against a reference. Use when writing, optimizing or "
        "reviewing a Triton kernel or its launcher (decode attention, linear attention, GEMM, normalization, "
        "quantized matmul), when a kernel under-fills the GPU or misses its memory or compute roofline, when an "
        "fp32 tl.dot chain loses accuracy, or when a native call holds the GIL in a serving loop."
    )


def decision_row(entry: Entry) -> dict:
    p = entry.pattern
    aw = p.applies_when
    return {
        "id": p.id,
        "title": p.title,
        "category": p.category.value,
        "status": p.status.value,
        "bottlenecks": [b.value for b in aw.bottlenecks],
        "conditions": aw.conditions.describe() if aw.conditions else "",
        "arch": describe_arch(aw.arch),
        "dtypes": list(aw.dtypes),
        "shapes": [describe_shape(s) for s in aw.shapes],
        "already_present_when": p.present_when.describe(),
        "safety": p.safety.value,
        "review": p.safety.review,
        "rewrite": p.transformation.rewrite or "",
        "params": {name: prm.model_dump(mode="json") for name, prm in p.transformation.params.items()},
        "reference": f"references/{p.id}.md",
    }


def _bottleneck_map(entries: list[Entry]) -> list[dict]:
    return [
        {"bottleneck": b.value, "patterns": [e for e in entries if b in e.pattern.applies_when.bottlenecks]}
        for b in BottleneckClass
    ]


def render_skill(entries: list[Entry]) -> dict[str, str]:
    """Every file of the skill, by relative path."""
    entries = sorted(entries, key=lambda e: e.id)
    env = Environment(loader=FileSystemLoader(TEMPLATES_DIR), undefined=StrictUndefined, trim_blocks=True,
                      lstrip_blocks=True, keep_trailing_newline=True, autoescape=False)
    env.filters["cell"] = table_cell
    front = yaml.safe_dump({"name": NAME, "description": description(entries)}, sort_keys=False, width=10_000, allow_unicode=True)
    files = {
        "SKILL.md": env.get_template("SKILL.md").render(
            frontmatter=front, entries=entries, bottlenecks=_bottleneck_map(entries), decision_table=DECISION_TABLE,
        ),
        DECISION_TABLE: json.dumps([decision_row(e) for e in entries], indent=2, ensure_ascii=False) + "\n",
    }
    for e in entries:
        files[f"references/{e.id}.md"] = pattern_markdown(e)
    return files


def export_skill(entries: list[Entry], out_dir: Path) -> Path:
    """Write the skill into out_dir (replacing an earlier export); return the SKILL.md path."""
    out = Path(out_dir).absolute()
    write_folder(out, render_skill(entries), MARKER, "skill")
    return out / "SKILL.md"
