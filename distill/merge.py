"""`--write`: merge distilled evidence into the library's pattern.yaml files.

Only the `evidence.upstream` block of a file changes; every other line, comment
and key order stays as written. Hand-curated entries are kept as they are;
entries the distiller wrote before (note "found by distill...") for the
projects distilled now are replaced by this run's most representative hits (at
most `cap` per project), so reruns do not pile up. The new text is validated as
a Pattern before it is written (atomically); the diff is shown first.
"""
from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

import yaml
from patterns.distill.detect import Detections, representative
from patterns.distill.errors import DistillError

from patterns.core.files import write_atomic
from patterns.core.library import Entry
from patterns.core.schema import Measurement, Pattern, UpstreamLocation

DISTILL_NOTE = "found by distill"


@dataclass
class Change:
    entry: Entry
    old: str
    new: str
    added: int
    removed: int

    def diff(self) -> str:
        path = str(self.entry.file("pattern.yaml"))
        return "".join(difflib.unified_diff(self.old.splitlines(True), self.new.splitlines(True), path, path))


def _scalar(value) -> str:
    text = yaml.safe_dump(value, default_flow_style=True, allow_unicode=True, width=10_000).strip()
    return text.removesuffix("\n...").removesuffix("...").strip()


def render_upstream(locations: list[UpstreamLocation], indent: str, item_indent: str | None = None) -> str:
    """`upstream:` at `indent`, its items' dashes at `item_indent` (default: two spaces deeper)."""
    if not locations:
        return f"{indent}upstream: []\n"
    dash = indent + "  " if item_indent is None else item_indent
    out = [f"{indent}upstream:\n"]
    for u in locations:
        d = u.model_dump(mode="json")
        first = True
        for key in ("project", "version", "path", "symbol", "lines", "note", "sha256"):
            value = d.get(key)
            if key in ("note", "sha256") and not value:
                continue
            text = f"[{value[0]}, {value[1]}]" if key == "lines" else _scalar(value)
            out.append(f"{dash}- {key}: {text}\n" if first else f"{dash}  {key}: {text}\n")
            first = False
    return "".join(out)


def _evidence_end(lines: list[str]) -> tuple[int, int]:
    """(line of `evidence:`, first line after its block)."""
    ev = next((i for i, ln in enumerate(lines) if re.match(r"^evidence:\s*(#.*)?$", ln)), None)
    if ev is None:
        raise DistillError("no block-style 'evidence:' mapping")
    end_ev = next((j for j in range(ev + 1, len(lines)) if lines[j].strip() and not lines[j].startswith((" ", "\t", "#"))), len(lines))
    return ev, end_ev


def _upstream_span(lines: list[str], key: str = "upstream") -> tuple[int, int, int, str] | None:
    """(evidence line, `key` line, end of the `key` list, its indent); None without `key:` under evidence."""
    ev, end_ev = _evidence_end(lines)
    up = next((j for j in range(ev + 1, end_ev) if re.match(rf"^(\s+){key}:", lines[j])), None)
    if up is None:
        return None
    indent = re.match(r"^(\s+)", lines[up])[1]
    j = up + 1
    if not re.match(rf"^\s+{key}:\s*\[", lines[up]):  # block list: runs to the next key at this indent
        while j < end_ev:
            ln = lines[j]
            width = len(ln) - len(ln.lstrip())
            if ln.strip() and width <= len(indent) and not (width == len(indent) and ln.lstrip().startswith("- ")):
                break
            j += 1
        while j > up + 1 and not lines[j - 1].strip():
            j -= 1
    return ev, up, j, indent


def _chunks(block: list[str]) -> list[str]:
    """The text of each list item of a block-style `upstream:` list, comments kept with the item after them."""
    items: list[list[str]] = []
    pending: list[str] = []
    first = next((ln for ln in block if ln.lstrip().startswith("- ")), "")
    dash = first[: len(first) - len(first.lstrip())]
    for ln in block:
        if ln.startswith(dash + "- "):  # an item at the list's own indent (not a nested `- 1032`)
            items.append(pending + [ln])
            pending = []
        elif items and ln.strip() and not ln.lstrip().startswith("#"):
            items[-1].append(ln)
        else:
            pending.append(ln)
    if items and pending:
        items[-1].extend(pending)
    return ["".join(x) for x in items]


def _splice(text: str, keep_idx: list[int], new: list[UpstreamLocation]) -> str:
    """evidence.upstream with the kept entries' original text and the new entries rendered after them."""
    lines = text.splitlines(True)
    span = _upstream_span(lines)
    if span is None:
        ev = next(i for i, ln in enumerate(lines) if re.match(r"^evidence:", ln))
        return "".join([*lines[:ev + 1], render_upstream(new, "  "), *lines[ev + 1:]])
    ev, up, end, indent = span
    chunks = _chunks(lines[up + 1:end])
    kept = [chunks[i] for i in keep_idx]
    if not kept and not new:
        return "".join([*lines[:up], f"{indent}upstream: []\n", *lines[end:]])
    item_indent = re.match(r"^(\s*)- ", next((ln for c in chunks for ln in c.splitlines() if ln.lstrip().startswith("- ")), indent + "  - "))[1]
    fresh = render_upstream(new, indent, item_indent).split("\n", 1)[1] if new else ""
    return "".join([*lines[:up], f"{indent}upstream:\n", *kept, fresh, *lines[end:]])


def plan(entries: list[Entry], det: Detections, projects: dict[str, str], cap: int = 5, problems: list[str] | None = None) -> list[Change]:
    """The changes --write would make. `projects` maps each distilled project to its version.

    A file whose evidence block cannot be merged is reported in `problems` (one line each)
    when a list is given, else raises DistillError.
    """
    changes = []
    for e in entries:
        hits = [h for h in det.hits if h.pattern == e.id and h.project in projects]
        path = e.file("pattern.yaml")
        old = path.read_text(encoding="utf-8")
        current = e.pattern.evidence.upstream
        keep = [u for u in current if not (u.note.startswith(DISTILL_NOTE) and u.project in projects)]
        removed = len(current) - len(keep)
        new_locs = list(keep)
        added = 0
        for project in sorted(projects):
            mine = representative([h for h in hits if h.project == project], cap * 3)
            n = 0
            for h in mine:
                if n >= cap:
                    break
                loc = h.location()
                if loc is None:
                    continue
                dup = any(u.project == loc.project and u.path == loc.path and u.lines[0] <= loc.lines[1] and loc.lines[0] <= u.lines[1] for u in keep)
                if dup:
                    continue
                new_locs.append(loc)
                n += 1
                added += 1
        if [u.model_dump() for u in new_locs] == [u.model_dump() for u in current]:
            continue
        keep_idx = [i for i, u in enumerate(current) if not (u.note.startswith(DISTILL_NOTE) and u.project in projects)]
        try:
            new = _splice(old, keep_idx, new_locs[len(keep):])
            data = yaml.safe_load(new)
            Pattern.model_validate(data)
            if [u.model_dump() for u in Pattern.model_validate(data).evidence.upstream] != [u.model_dump() for u in new_locs]:
                raise ValueError("the spliced list does not read back as planned")
        except (DistillError, yaml.YAMLError, ValueError, IndexError) as exc:
            line = f"{path}: evidence.upstream: cannot merge ({str(exc).splitlines()[0]})"
            if problems is None:
                raise DistillError(line) from None
            problems.append(line)
            continue
        changes.append(Change(e, old, new, added, removed))
    return changes


def render_measured(measurements: list[Measurement], indent: str, item_indent: str | None = None) -> str:
    """`measured:` at `indent` with one block item per Measurement, keys in schema order."""
    if not measurements:
        return f"{indent}measured: []\n"
    dash = indent + "  " if item_indent is None else item_indent
    out = [f"{indent}measured:\n"]
    for m in measurements:
        for i, (key, value) in enumerate(m.model_dump(mode="json").items()):
            out.append(f"{dash}{'- ' if i == 0 else '  '}{key}: {_scalar(value)}\n")
    return "".join(out)


def append_measured(text: str, new: list[Measurement], where: str = "pattern.yaml") -> str:
    """`text` (a pattern.yaml) with `new` appended to evidence.measured; every other line kept as written.

    The result is validated as a Pattern and must read back as the old list plus
    `new`; otherwise DistillError (one line naming `where`).
    """
    try:
        old = Pattern.model_validate(yaml.safe_load(text)).evidence.measured
        lines = text.splitlines(True)
        span = _upstream_span(lines, "measured")
        if span is None:  # no `measured:` key: add the list at the end of the evidence block
            ev, end_ev = _evidence_end(lines)
            while end_ev > ev + 1 and not lines[end_ev - 1].strip():
                end_ev -= 1
            indent = next((re.match(r"^(\s+)", ln)[1] for ln in lines[ev + 1:end_ev] if ln.strip()), "  ")
            out = "".join([*lines[:end_ev], render_measured(new, indent), *lines[end_ev:]])
        else:
            _, up, end, indent = span
            chunks = _chunks(lines[up + 1:end])
            item_indent = next((re.match(r"^(\s*)- ", ln)[1] for c in chunks for ln in c.splitlines() if ln.lstrip().startswith("- ")), None)
            fresh = render_measured(new, indent, item_indent).split("\n", 1)[1] if new else ""
            out = "".join([*lines[:up], f"{indent}measured:\n", *chunks, fresh, *lines[end:]])
        got = Pattern.model_validate(yaml.safe_load(out)).evidence.measured
        if [m.model_dump() for m in got] != [m.model_dump() for m in [*old, *new]]:
            raise ValueError("the spliced list does not read back as planned")
    except (DistillError, yaml.YAMLError, ValueError, IndexError, TypeError) as exc:
        raise DistillError(f"{where}: evidence.measured: cannot merge ({str(exc).splitlines()[0]})") from None
    return out


def apply(changes: list[Change]) -> None:
    for ch in changes:
        path = ch.entry.file("pattern.yaml")
        if path.read_text(encoding="utf-8") != ch.old:
            raise DistillError(f"{path}: changed while distilling; run again")
        write_atomic(path, ch.new)
