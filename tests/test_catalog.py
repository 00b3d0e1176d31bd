"""The static HTML catalog, rendered from the real library.

Pages are read back with a small HTML parser (headings, diff rows, evidence);
the index's filter script is run in headless Chromium (Debian's `chromium`),
whose --dump-dom output shows which rows the script hid. Without
/usr/bin/chromium the browser tests skip, unless CI is set: then they fail.
"""
from __future__ import annotations

import difflib
import os
import re
import signal
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from patterns import catalog
from patterns.catalog import MARKER, CatalogError, render_catalog
from patterns.core.cases import cases
from patterns.core.library import Entry, load_library
from patterns.core.schema import Reference

ENTRIES = load_library()
IDS = [e.id for e in ENTRIES]
HEADINGS = [
    "Summary",
    "Why",
    "When it applies",
    "Already present when",
    "Resource limits",
    "Transformation",
    "Safety and review",
    "Before → After",
    "Evidence",
    "Traps",
    "References",
]
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_TIMEOUT_S = 30  # a call takes ~2 s; the limit only stops a hung browser


# --------------------------------------------------------------------------------------
# reading HTML back
# --------------------------------------------------------------------------------------


class Element:
    def __init__(self, tag: str, attrs: dict[str, str | None], parent: Element | None):
        self.tag, self.attrs, self.parent, self.parts = tag, attrs, parent, []

    def within(self, other: Element) -> bool:
        el = self.parent
        while el is not None and el is not other:
            el = el.parent
        return el is other

    @property
    def text(self) -> str:
        return "".join(self.parts)

    @property
    def classes(self) -> list[str]:
        return (self.attrs.get("class") or "").split()


class Doc(HTMLParser):
    """Every element in document order, each with its full text content."""

    VOID = {"meta", "link", "input", "br", "img", "hr", "col", "source", "wbr"}

    def __init__(self, html: str):
        super().__init__(convert_charrefs=True)
        self.elements: list[Element] = []
        self._open: list[Element] = []
        self.feed(html)
        self.close()

    def handle_starttag(self, tag, attrs):
        el = Element(tag, dict(attrs), self._open[-1] if self._open else None)
        self.elements.append(el)
        if tag not in self.VOID:
            self._open.append(el)

    def handle_endtag(self, tag):
        for i in range(len(self._open) - 1, -1, -1):
            if self._open[i].tag == tag:
                del self._open[i:]
                return

    def handle_data(self, data):
        for el in self._open:
            el.parts.append(data)

    def find(self, tag: str, cls: str | None = None, **attrs: str) -> list[Element]:
        return [
            e
            for e in self.elements
            if e.tag == tag
            and (cls is None or cls in e.classes)
            and all(e.attrs.get(k.replace("_", "-")) == v for k, v in attrs.items())
        ]

    def by_id(self, id_: str) -> Element:
        (el,) = [e for e in self.elements if e.attrs.get("id") == id_]
        return el

    def inside(self, outer: Element, tag: str, cls: str | None = None) -> list[Element]:
        return [e for e in self.find(tag, cls) if e.within(outer)]

    @property
    def rows(self) -> list[Element]:
        return [e for e in self.elements if e.tag == "tr" and "data-id" in e.attrs]

    def diff_src(self, kind: str) -> list[str]:
        """Text of the diff rows of one kind ("add", "del"), sign included."""
        return [self.inside(row, "td", "src")[0].text for row in self.find("tr", kind)]


def _signed_lines(before: str, after: str, sign: str) -> list[str]:
    diff = difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="")
    return [d for d in diff if d.startswith(sign) and not d.startswith(sign * 3)]


def _unticked(text: str) -> str:
    return re.sub(r"`([^`\n]+)`", r"\1", text)


def _page_entry():
    """The pattern the browser test opens: the first with a before/after pair."""
    with_examples = [e for e in ENTRIES if e.has_examples()]
    assert with_examples, "no pattern in the library has before.py/after.py"
    return with_examples[0]


@pytest.fixture(scope="module")
def profile(tmp_path_factory) -> Path:
    """One Chromium profile for the module's calls (they run one at a time)."""
    return tmp_path_factory.mktemp("chromium-profile")


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("catalog") / "site"
    index = render_catalog(ENTRIES, out)
    assert index == out / "index.html"
    return out


# --------------------------------------------------------------------------------------
# the rendered files
# --------------------------------------------------------------------------------------


def test_index_lists_every_pattern(site):
    doc = Doc((site / "index.html").read_text(encoding="utf-8"))
    rows = doc.rows
    assert [r.attrs["data-id"] for r in rows] == IDS
    assert doc.by_id("count").text == f"{len(IDS)} of {len(IDS)} patterns"
    for entry, row in zip(ENTRIES, rows):
        p = entry.pattern
        assert row.attrs["data-category"] == p.category.value
        assert row.attrs["data-safety"] == p.safety.value
        assert row.attrs["data-bottleneck"].split() == [b.value for b in p.applies_when.bottlenecks]
        assert row.attrs["data-project"].split() == p.projects
        assert p.title in row.text and p.id in row.text
        assert (p.transformation.rewrite or "by hand") in row.text
        assert (site / f"{p.id}.html").is_file()
    for name in catalog.FILTERS:
        assert doc.find("select", name=name), f"no <select name={name}>"
    assert doc.find("input", id="q")


@pytest.mark.parametrize("entry", ENTRIES, ids=IDS)
def test_pattern_page(site, entry):
    p = entry.pattern
    doc = Doc((site / f"{p.id}.html").read_text(encoding="utf-8"))
    assert [h.text for h in doc.find("h2")] == HEADINGS
    assert doc.find("h1")[0].text == p.title
    text = " ".join(doc.find("main")[0].text.split())

    # why keeps its line breaks; `code` spans lose their backticks
    assert doc.find("div", "why")[0].text == _unticked(p.why.strip())
    assert p.present_when.describe() in text
    if p.applies_when.conditions:
        assert p.applies_when.conditions.describe() in text
    assert p.safety.review in text
    assert (p.transformation.rewrite or "none: apply by hand") in text

    # Before → After: the same +/- lines as `diff -u before.py after.py`
    if entry.has_examples():
        before, after = (entry.file(n).read_text(encoding="utf-8") for n in ("before.py", "after.py"))
        added = _signed_lines(before, after, "+")
        assert added, "after.py adds no line to before.py"
        assert doc.diff_src("add") == added
        assert doc.diff_src("del") == _signed_lines(before, after, "-")
        # both files in full, each in a <details>
        listings = {doc.inside(d, "summary")[0].text.split()[0]: doc.inside(d, "pre", "listing")[0].text for d in doc.find("details", "file")}
        assert listings["before.py"].splitlines() == before.splitlines()
        assert listings["after.py"].splitlines() == after.splitlines()

    # the rewrite's refuse cases, each with its reason
    refuses = [c for c in cases(entry.folder) if c.refuse is not None]
    items = [" ".join(li.text.split()) for li in doc.find("li") if li.within(doc.find("ul", "refuses")[0])] if refuses else []
    assert items == [" ".join(f"cases/{c.name}.py: {c.reason_text}{f' ({c.note})' if c.note else ''}".split()) for c in refuses]

    # Evidence: "project version path:start-end (symbol)" and the note
    refs = [" ".join(c.text.split()) for c in doc.find("code", "ref")]
    for u in p.evidence.upstream:
        assert f"{u.project} {u.version} {u.path}:{u.lines[0]}-{u.lines[1]} ({u.symbol})" in refs
        if u.note:
            assert " ".join(_unticked(u.note).split()) in text
    tables = doc.find("table", "measured")
    rows = [r for t in tables for r in doc.inside(t, "tr") if r.parent.tag == "tbody"]
    assert len(rows) == len(p.evidence.measured)
    for m, row in zip(p.evidence.measured, rows):
        assert m.command in row.text and m.hardware in row.text
    for t in p.traps:
        assert " ".join(_unticked(t.fact).split()) in text
    for r in p.references:
        assert r.title in text


def test_text_is_escaped_and_only_web_links_are_links(tmp_path):
    entry = ENTRIES[0]
    evil = entry.pattern.model_copy(
        update={
            "title": "<script>alert(1)</script> `x`",
            "summary": "a `<b>code</b>` span & more",
            "references": [Reference(title="bad", url="javascript:alert(1)"), Reference(title="good", url="https://example.org/?a=1&b=2")],
        }
    )
    out = tmp_path / "site"
    render_catalog([Entry(evil, entry.folder)], out)
    for page in (out / "index.html", out / f"{entry.id}.html"):
        html = page.read_text(encoding="utf-8")
        assert "<script>alert(1)" not in html
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    html = (out / f"{entry.id}.html").read_text(encoding="utf-8")
    assert "<code>&lt;b&gt;code&lt;/b&gt;</code>" in html
    assert 'href="javascript:' not in html
    assert 'href="https://example.org/?a=1&amp;b=2"' in html


def test_failed_render_keeps_the_previous_catalog(tmp_path, monkeypatch):
    out = tmp_path / "site"
    render_catalog(ENTRIES, out)
    (out / "stale.html").write_text("from an older render")
    before = {p.name: p.read_bytes() for p in out.iterdir()}

    def boom(entry):
        raise RuntimeError("render failed half-way")

    monkeypatch.setattr(catalog, "_page_context", boom)
    with pytest.raises(RuntimeError, match="half-way"):
        render_catalog(ENTRIES, out)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["site"], "temp folder left behind"

    monkeypatch.undo()
    render_catalog(ENTRIES, out)
    assert not (out / "stale.html").exists(), "a new render replaces the folder as a whole"
    assert (out / MARKER).exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["site"]


def test_refuses_to_replace_a_folder_that_is_not_a_catalog(tmp_path):
    out = tmp_path / "notes"
    out.mkdir()
    (out / "mine.txt").write_text("keep me")
    with pytest.raises(CatalogError, match="not empty"):
        render_catalog(ENTRIES, out)
    assert (out / "mine.txt").read_text() == "keep me"
    empty = tmp_path / "empty"
    empty.mkdir()
    assert render_catalog(ENTRIES, empty).is_file()


# --------------------------------------------------------------------------------------
# headless Chromium
# --------------------------------------------------------------------------------------


def _chromium() -> Path:
    if CHROMIUM.exists():
        return CHROMIUM
    if "CI" in os.environ:
        pytest.fail(f"CI is set but {CHROMIUM} is missing: .ci/run must install Debian's chromium package")
    pytest.skip(f"{CHROMIUM} not installed (apt-get install -y chromium); with CI set this test fails instead")


def dump_dom(url: str, profile: Path) -> str:
    """The DOM after the page's scripts ran, as Chromium serialises it."""
    cmd = [
        str(_chromium()),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile}",
        "--virtual-time-budget=2000",
        "--dump-dom",
        url,
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=CHROMIUM_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the browser and its helpers, started here in their own session
        proc.communicate()
        pytest.fail(f"chromium did not finish within {CHROMIUM_TIMEOUT_S}s: {url}")
    assert proc.returncode == 0 and "</html>" in out, f"chromium exit {proc.returncode}: {err[-2000:]}"
    return out


def test_browser_filters_from_the_query_string(site, profile):
    doc = Doc(dump_dom((site / "index.html").as_uri() + "?category=numerics", profile))
    rows = doc.rows
    assert [r.attrs["data-id"] for r in rows] == IDS
    numerics = [r.attrs["data-id"] for r in rows if r.attrs["data-category"] == "numerics"]
    assert numerics, "the library has no numerics pattern to filter on"
    shown = [r.attrs["data-id"] for r in rows if "hidden" not in r.attrs]
    assert shown == numerics
    assert doc.by_id("count").text == f"{len(numerics)} of {len(IDS)} patterns"
    assert doc.by_id("permalink").attrs["href"] == "index.html?category=numerics"
    assert "hidden" not in doc.by_id("clear").attrs


def test_browser_search_and_filter_combine(site, profile):
    target = ENTRIES[-1].pattern
    url = (site / "index.html").as_uri() + f"?safety={target.safety.value}&q={target.id}"
    doc = Doc(dump_dom(url, profile))
    shown = [r for r in doc.rows if "hidden" not in r.attrs]
    assert target.id in [r.attrs["data-id"] for r in shown]
    assert all(r.attrs["data-safety"] == target.safety.value and target.id in r.attrs["data-search"] for r in shown)
    assert doc.by_id("count").text == f"{len(shown)} of {len(IDS)} patterns"
    assert doc.by_id("permalink").attrs["href"] == f"index.html?safety={target.safety.value}&q={target.id}"
    assert "hidden" in doc.by_id("empty").attrs

    doc = Doc(dump_dom((site / "index.html").as_uri() + "?q=no+such+pattern+zzqx", profile))
    assert all("hidden" in r.attrs for r in doc.rows)
    assert doc.by_id("count").text == f"0 of {len(IDS)} patterns"
    assert "hidden" not in doc.by_id("empty").attrs


def test_browser_renders_a_pattern_page(site, profile):
    entry = _page_entry()
    doc = Doc(dump_dom((site / f"{entry.id}.html").as_uri(), profile))
    assert [h.text for h in doc.find("h2")] == HEADINGS
    before, after = (entry.file(n).read_text(encoding="utf-8") for n in ("before.py", "after.py"))
    added = doc.diff_src("add")
    assert added, "the Before → After diff has no added line"
    assert added == _signed_lines(before, after, "+")
    assert doc.find("pre", "listing"), "before.py/after.py in full are missing"
