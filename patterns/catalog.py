"""Static HTML catalog of the library: an index with filters and search, a page per pattern.

    render_catalog(load_library(), Path("out/catalog"))  ->  out/catalog/index.html

Pages come from the Jinja2 templates in patterns/catalog_templates (autoescaped).
The CSS and the index's filter script are inlined, so the catalog opens from
file:// with no network. Every pattern page has the same headings (SECTIONS), in
the same order, like Ruff's rule pages.

The output folder is replaced as a whole: pages are rendered into a temp folder
beside it and swapped in at the end, so a failed render leaves the previous
catalog in place. A non-empty folder that is not a catalog is never replaced.
"""
from __future__ import annotations

import difflib
import os
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import get_args

from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape
from markupsafe import Markup, escape

from patterns.core.cases import cases
from patterns.core.files import FolderError, write_folder
from patterns.core.library import Entry
from patterns.core.schema import (
    ArchCondition,
    BottleneckClass,
    Category,
    Measurement,
    Safety,
    ShapeCondition,
    UpstreamLocation,
)

TEMPLATES_DIR = Path(__file__).parent / "catalog_templates"
MARKER = ".patterns-catalog"  # written into every catalog; only such a folder is ever replaced

# The fixed headings of a pattern page: (anchor, heading), in page order.
SECTIONS = (
    ("summary", "Summary"),
    ("why", "Why"),
    ("when-it-applies", "When it applies"),
    ("already-present-when", "Already present when"),
    ("resource-limits", "Resource limits"),
    ("transformation", "Transformation"),
    ("safety-and-review", "Safety and review"),
    ("before-after", "Before → After"),
    ("evidence", "Evidence"),
    ("traps", "Traps"),
    ("references", "References"),
)
FILTERS = ("category", "bottleneck", "project", "safety")  # URL query keys, besides q
PROJECTS = get_args(UpstreamLocation.model_fields["project"].annotation)


class CatalogError(ValueError):
    """The catalog cannot be written where asked."""


# --------------------------------------------------------------------------------------
# rendering
# --------------------------------------------------------------------------------------


def render_catalog(entries: list[Entry], out_dir: Path) -> Path:
    """Write index.html and <id>.html for every entry into out_dir; return the index path."""
    out = Path(os.path.abspath(out_dir))
    ids = [e.id for e in entries]
    if len(set(ids)) != len(ids):
        raise CatalogError(f"duplicate pattern ids: {sorted({i for i in ids if ids.count(i) > 1})}")
    if "index" in ids:
        raise CatalogError("a pattern with id 'index' would overwrite index.html")
    env = _env()
    files = {"index.html": env.get_template("index.html").render(**_index_context(entries))}
    page = env.get_template("pattern.html")
    for entry in entries:
        files[f"{entry.id}.html"] = page.render(**_page_context(entry))
    try:
        write_folder(out, files, MARKER, "catalog")
    except FolderError as exc:
        raise CatalogError(str(exc)) from None
    return out / "index.html"


def pattern_markdown(entry: Entry) -> str:
    """The pattern's catalog page as Markdown: the same sections, in the same order, from the same view data."""
    return _env().get_template("pattern.md").render(**_page_context(entry))


@lru_cache(maxsize=1)
def _env() -> Environment:
    env = Environment(
        loader=FileSystemLoader(TEMPLATES_DIR),
        autoescape=select_autoescape(["html"]),  # pattern.md is Markdown: nothing to escape
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["inline_code"] = inline_code
    env.filters["ratio"] = format_ratio
    env.filters["cell"] = table_cell
    env.globals["sections"] = SECTIONS
    env.globals["section_title"] = dict(SECTIONS)
    return env


# --------------------------------------------------------------------------------------
# view data: everything the templates show is decided here
# --------------------------------------------------------------------------------------


def _index_context(entries: list[Entry]) -> dict:
    rows = [_row(e) for e in entries]

    def options(key: str, values) -> list[dict]:
        return [{"value": v, "count": sum(v in r[key] for r in rows)} for v in values]

    filters = [
        {"name": "category", "label": "Category", "options": options("categories", [c.value for c in Category])},
        {"name": "bottleneck", "label": "Bottleneck", "options": options("bottlenecks", [b.value for b in BottleneckClass])},
        {"name": "project", "label": "Upstream project", "options": options("projects", PROJECTS)},
        {"name": "safety", "label": "Safety", "options": options("safeties", [s.value for s in Safety])},
    ]
    assert [f["name"] for f in filters] == list(FILTERS)
    return {"rows": rows, "filters": filters, "total": len(rows)}


def _row(entry: Entry) -> dict:
    p = entry.pattern
    search = [p.id, p.category.value, p.status.value, p.safety.value, p.search_text()]
    search += [u.ref for u in p.evidence.upstream]
    search += [p.transformation.rewrite or ""]
    return {
        "id": p.id,
        "title": p.title,
        "summary": p.summary,
        "category": p.category.value,
        "categories": [p.category.value],
        "status": p.status.value,
        "safety": p.safety.value,
        "safeties": [p.safety.value],
        "bottlenecks": [b.value for b in p.applies_when.bottlenecks],
        "projects": p.projects,
        "rewrite": p.transformation.rewrite or "",
        "search": " ".join(" ".join(search).lower().split()),
    }


def _page_context(entry: Entry) -> dict:
    p = entry.pattern
    aw = p.applies_when
    files = {name: _read(entry, name) for name in ("before.py", "after.py", "reference.py")}
    diff = None
    if files["before.py"] is not None and files["after.py"] is not None:
        diff = diff_lines(files["before.py"], files["after.py"])
    return {
        "p": p,
        "folder": f"patterns/library/{entry.folder.name}",
        "applies": {
            "bottlenecks": [b.value for b in aw.bottlenecks],
            "conditions": aw.conditions.describe() if aw.conditions else "",
            "arch": describe_arch(aw.arch),
            "dtypes": aw.dtypes,
            "shapes": [describe_shape(s) for s in aw.shapes],
        },
        "limits": [
            (label, getattr(p.resource_limits, key))
            for key, label in (
                ("registers", "Registers"),
                ("shared_memory", "Shared memory"),
                ("sm_count", "SM count"),
                ("occupancy", "Occupancy"),
                ("notes", "Notes"),
            )
            if getattr(p.resource_limits, key)
        ],
        "diff": diff,
        "refuses": [(f"cases/{c.name}.py", c.reason_text, c.note) for c in cases(entry.folder) if c.refuse is not None],
        "files": [(name, text, len(text.splitlines())) for name, text in files.items() if text is not None],
        "references": [{"title": r.title, "url": r.url if _linkable(r.url) else "", "text": r.url} for r in p.references],
    }


def _read(entry: Entry, name: str) -> str | None:
    path = entry.file(name)
    return path.read_text(encoding="utf-8", errors="replace") if path.exists() else None


def _linkable(url: str) -> bool:
    return url.startswith(("https://", "http://"))


def describe_arch(arch: ArchCondition) -> str:
    vendors = ", ".join({"nvidia": "NVIDIA", "amd": "AMD"}.get(v, v) for v in arch.vendors) or "none"
    if arch.min_sm is not None and arch.max_sm is not None:
        return f"{vendors}; sm_{arch.min_sm} to sm_{arch.max_sm}"
    if arch.min_sm is not None:
        return f"{vendors}; sm_{arch.min_sm} or newer"
    if arch.max_sm is not None:
        return f"{vendors}; up to sm_{arch.max_sm}"
    return vendors


def describe_shape(s: ShapeCondition) -> str:
    if s.min is not None and s.max is not None:
        return f"{s.min} ≤ {s.name} ≤ {s.max}"
    if s.min is not None:
        return f"{s.name} ≥ {s.min}"
    if s.max is not None:
        return f"{s.name} ≤ {s.max}"
    return f"{s.name} any"


def format_ratio(m: Measurement) -> str:
    if m.metric == "speedup":
        return f"{m.ratio:.2f}×"
    return f"{m.ratio:.3g} ({m.metric})"


def table_cell(text: str) -> str:
    """Text that stays inside one cell of a Markdown table."""
    return " ".join(str(text).split()).replace("|", "\\|")


_CODE = re.compile(r"`([^`\n]+)`")


def inline_code(text: str) -> Markup:
    """Escape text and turn `backticked` spans into <code>; nothing else is interpreted."""
    out, pos = [], 0
    for m in _CODE.finditer(text):
        out += [escape(text[pos : m.start()]), Markup("<code>%s</code>") % m.group(1)]
        pos = m.end()
    out.append(escape(text[pos:]))
    return Markup("").join(out)


# --------------------------------------------------------------------------------------
# unified diff with line numbers and changed words marked
# --------------------------------------------------------------------------------------


@dataclass
class DiffLine:
    kind: str  # "hunk", "ctx", "del", "add"
    old: int | None = None
    new: int | None = None
    parts: list[tuple[str, bool]] = field(default_factory=list)  # (text, changed) segments

    @property
    def sign(self) -> str:
        return {"ctx": " ", "del": "-", "add": "+", "hunk": ""}[self.kind]

    @property
    def text(self) -> str:
        return "".join(t for t, _ in self.parts)


def diff_lines(before: str, after: str, context: int = 3) -> list[DiffLine]:
    """The unified diff of before → after (as `diff -u`), one DiffLine per row."""
    a, b = before.splitlines(), after.splitlines()
    out: list[DiffLine] = []
    for group in difflib.SequenceMatcher(None, a, b, autojunk=False).get_grouped_opcodes(context):
        i1, i2, j1, j2 = group[0][1], group[-1][2], group[0][3], group[-1][4]
        out.append(DiffLine("hunk", parts=[(f"@@ -{_range(i1, i2)} +{_range(j1, j2)} @@", False)]))
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                out += [DiffLine("ctx", i + 1, j + 1, [(a[i], False)]) for i, j in zip(range(i1, i2), range(j1, j2))]
                continue
            olds = [DiffLine("del", i + 1, None, [(a[i], False)]) for i in range(i1, i2)]
            news = [DiffLine("add", None, j + 1, [(b[j], False)]) for j in range(j1, j2)]
            if len(olds) == len(news):
                for o, n in zip(olds, news):
                    _mark_words(o, n)
            out += olds + news
    return out


def _range(start: int, stop: int) -> str:
    length = stop - start
    if length == 1:
        return str(start + 1)
    return f"{start + 1 if length else start},{length}"


_TOKEN = re.compile(r"\w+|\s+|[^\w\s]")


def _mark_words(old: DiffLine, new: DiffLine) -> None:
    """Mark the tokens that differ between a removed line and the line that replaced it."""
    x, y = _TOKEN.findall(old.text), _TOKEN.findall(new.text)
    sm = difflib.SequenceMatcher(None, x, y, autojunk=False)
    if sm.ratio() < 0.6:
        return
    old.parts, new.parts = [], []
    for tag, i1, i2, j1, j2 in sm.get_opcodes():
        if i2 > i1:
            old.parts.append(("".join(x[i1:i2]), tag != "equal"))
        if j2 > j1:
            new.parts.append(("".join(y[j1:j2]), tag != "equal"))
