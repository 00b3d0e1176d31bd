"""`patterns skill export DIR`: an agent skill whose every link resolves, with each pattern once, re-exported byte for byte."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from patterns.catalog import SECTIONS, pattern_markdown
from patterns.cli import main
from patterns.core.library import load_library
from patterns.core.schema import BottleneckClass
from patterns.skill import DECISION_TABLE, MARKER, NAME, export_skill

LINK = re.compile(r"\]\(([^)\s]+)\)")


def frontmatter(text: str) -> dict:
    assert text.startswith("---\n")
    head, sep, _ = text[4:].partition("\n---\n")
    assert sep, "frontmatter not closed"
    return yaml.safe_load(head)


def tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def skill(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("skill") / "triton-kernel-patterns"
    with pytest.raises(SystemExit) as exc:
        main(["skill", "export", str(out)])
    assert exc.value.code in (0, None)
    return out


def test_frontmatter_parses(skill: Path) -> None:
    meta = frontmatter((skill / "SKILL.md").read_text(encoding="utf-8"))
    assert set(meta) == {"name", "description"}
    assert meta["name"] == NAME and re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", meta["name"]) and len(meta["name"]) <= 64
    assert 0 < len(meta["description"]) <= 1024 and "Use when" in meta["description"]


def test_every_reference_exists_and_every_pattern_appears_once(skill: Path) -> None:
    ids = sorted(e.id for e in load_library())
    text = (skill / "SKILL.md").read_text(encoding="utf-8")
    links = LINK.findall(text)
    assert links and all((skill / link).is_file() for link in links), [link for link in links if not (skill / link).is_file()]
    patterns_section = text.split("\n## Patterns\n", 1)[1]
    listed = re.findall(r"^\| \[`([a-z0-9_]+)`\]\(references/\1\.md\)", patterns_section, flags=re.M)
    assert listed == ids  # each pattern once, in id order
    assert sorted(p.stem for p in (skill / "references").iterdir()) == ids
    table = json.loads((skill / DECISION_TABLE).read_text(encoding="utf-8"))
    assert [row["id"] for row in table] == ids
    assert all((skill / row["reference"]).is_file() for row in table)
    assert f"`{DECISION_TABLE}`" in text
    for name in ("patterns suggest", "patterns apply", "patterns validate"):
        assert name in text


def test_bottleneck_map_matches_the_library(skill: Path) -> None:
    text = (skill / "SKILL.md").read_text(encoding="utf-8")
    section = text.split("\n## Bottleneck → technique\n", 1)[1].split("\n## ", 1)[0]
    rows = dict(re.findall(r"^\| ([a-z-]+) \| (.*) \|$", section, flags=re.M))
    for b in BottleneckClass:
        want = sorted(e.id for e in load_library() if b in e.pattern.applies_when.bottlenecks)
        assert re.findall(r"\[`([a-z0-9_]+)`\]", rows[b.value]) == want, b.value


def test_reference_is_the_catalog_page(skill: Path) -> None:
    for entry in load_library():
        page = (skill / "references" / f"{entry.id}.md").read_text(encoding="utf-8")
        assert page == pattern_markdown(entry)
        headings = re.findall(r"^## (.+)$", page, flags=re.M)
        assert headings == [title for _, title in SECTIONS], entry.id


def test_reexport_is_byte_identical_and_replaces_only_an_export(skill: Path, tmp_path: Path) -> None:
    first = tree(skill)
    again = export_skill(load_library(), tmp_path / "again").parent
    assert tree(again) == first
    (skill / "references" / "stale.md").write_text("left from an older library")
    export_skill(load_library(), skill)
    assert tree(skill) == first and MARKER in first
    foreign = tmp_path / "notes"
    foreign.mkdir()
    (foreign / "todo.txt").write_text("mine")
    with pytest.raises(ValueError, match="holds no skill"):
        export_skill(load_library(), foreign)
    assert (foreign / "todo.txt").read_text() == "mine"
