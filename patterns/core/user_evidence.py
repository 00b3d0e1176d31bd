"""The user's own evidence: what the gate measured on their kernels, kept apart from the library.

    <user data dir>/patterns/evidence/<pattern_id>.json    (PATTERNS_EVIDENCE_HOME overrides the folder)

Accepting a review item whose target is not a file of the project's kernels/
records the measurement here, never in the installed library's pattern.yaml:
the library's `evidence.measured` is curated (a maintainer reviews what goes
in, with `patterns evidence export`), the user's store is theirs. `suggest`
and `show` list both, each under its own label.

Each file is a JSON list of records: the Measurement (patterns.core.schema),
the review item that produced it, its op and target, and when. A record is
kept once per (measurement, item). What a measurement means is its metric:
`speedup` (candidate over baseline time on a GPU, > 1 faster) only ever comes
from a GPU bundle; `max-rel-err-vs-baseline` is the interpreter's error ratio
(< 1 more accurate) and says nothing about speed (`describe` words each).
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from pydantic import ValidationError

from patterns.core import files
from patterns.core.schema import Measurement, StrictModel

SPEEDUP = "speedup"
ERROR_RATIO = "max-rel-err-vs-baseline"


class EvidenceStoreError(ValueError):
    """A user evidence file that cannot be read: one line, CLI exit 2."""


class UserRecord(StrictModel):
    measurement: Measurement
    pattern_id: str
    item: str = ""
    op: str = ""
    target: str = ""
    recorded: str = ""


def evidence_home() -> Path:
    """PATTERNS_EVIDENCE_HOME; else beside PATTERNS_AGENT_HOME when that is set (one folder per
    isolated setup); else the user data dir."""
    env = os.environ.get("PATTERNS_EVIDENCE_HOME")
    if env:
        return Path(env)
    agent = os.environ.get("PATTERNS_AGENT_HOME")
    if agent:
        return Path(agent) / "evidence"
    import platformdirs

    return Path(platformdirs.user_data_dir("patterns")) / "evidence"


def _file(pattern_id: str, root: Path | None) -> Path:
    return (root or evidence_home()) / f"{pattern_id}.json"


def records(pattern_id: str, root: Path | None = None) -> list[UserRecord]:
    """The user's records for one pattern, oldest first ([] when there are none)."""
    path = _file(pattern_id, root)
    if not path.is_file():
        return []
    try:
        return [UserRecord.model_validate(r) for r in json.loads(path.read_text(encoding="utf-8"))]
    except (ValueError, ValidationError, TypeError) as exc:
        raise EvidenceStoreError(f"{path}: not a list of evidence records: {str(exc).splitlines()[0]}") from None


def all_records(root: Path | None = None) -> list[UserRecord]:
    folder = root or evidence_home()
    if not folder.is_dir():
        return []
    return [r for path in sorted(folder.glob("*.json")) for r in records(path.stem, folder)]


def add(record: UserRecord, root: Path | None = None) -> bool:
    """Append the record (atomically) unless the same measurement of the same item is there; whether it was added.
    Callers serialise (the review store's lock)."""
    have = records(record.pattern_id, root)
    if any(r.measurement == record.measurement and r.item == record.item for r in have):
        return False
    path = _file(record.pattern_id, root)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps([r.model_dump(mode="json") for r in [*have, record]], indent=2) + "\n"
    files.write_atomic(path, text.encode())
    return True


def describe(m: Measurement) -> str:
    """A measurement in words that cannot be mistaken: a speed ratio only for `speedup`."""
    if m.metric == SPEEDUP:
        return f"{m.ratio:.2f}x speed on {m.hardware}"
    if m.metric == ERROR_RATIO:
        return f"error ratio {m.ratio:.3g} vs baseline on {m.hardware} (not a speed)"
    return f"{m.metric} {m.ratio:.3g} on {m.hardware}"
