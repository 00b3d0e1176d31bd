"""An agent run's journal: one JSON object per line, appended, flushed and fsynced per event.

The journal is what a run resumes from. Every event is on disk before the
agent acts on it, so a kill at any moment leaves a prefix of the run. The one
thing a kill can leave behind is a last line cut short (no newline): it is
dropped, and truncated away on the next append. A broken line anywhere else is
not crash residue but damage, and is reported (JournalError, one line, CLI
exit 2) rather than guessed around.
"""
from __future__ import annotations

import datetime as dt
import os
from pathlib import Path
from typing import Any, Iterator

from pydantic import ValidationError

from patterns.core.records import JournalEvent


class JournalError(ValueError):
    """A journal that cannot be read; one line naming the file and line."""


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds")


class Journal:
    def __init__(self, path: Path):
        self.path = Path(path)
        self.events: list[JournalEvent] = []
        self._valid_bytes = 0
        if self.path.exists():
            self._read()

    def _read(self) -> None:
        data = self.path.read_bytes()
        offset = 0
        for lineno, raw in enumerate(data.splitlines(keepends=True), 1):
            if not raw.endswith(b"\n"):
                break  # a last line cut short by a kill: not an event
            try:
                event = JournalEvent.model_validate_json(raw)
            except ValidationError as exc:
                err = exc.errors()[0]
                where = ".".join(str(x) for x in err["loc"]) or "(line)"
                raise JournalError(f"{self.path}:{lineno}: corrupt journal: {where}: {err['msg']}") from None
            if event.seq != len(self.events) + 1:
                raise JournalError(f"{self.path}:{lineno}: corrupt journal: event {event.seq} where {len(self.events) + 1} was expected")
            self.events.append(event)
            offset += len(raw)
        self._valid_bytes = offset

    def append(self, kind: str, data: dict[str, Any] | None = None) -> JournalEvent:
        event = JournalEvent(seq=len(self.events) + 1, at=_now(), kind=kind, data=data or {})
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "ab") as f:
            if f.tell() != self._valid_bytes:  # drop a cut-short last line before appending after it
                f.truncate(self._valid_bytes)
                f.seek(self._valid_bytes)
            line = (event.model_dump_json() + "\n").encode()
            f.write(line)
            f.flush()
            os.fsync(f.fileno())
        self._valid_bytes += len(line)
        self.events.append(event)
        return event

    def of(self, kind: str) -> Iterator[JournalEvent]:
        return (e for e in self.events if e.kind == kind)

    def last(self, kind: str) -> JournalEvent | None:
        return next((e for e in reversed(self.events) if e.kind == kind), None)

    @property
    def finished(self) -> bool:
        return self.last("finish") is not None


def read_start(path: Path) -> dict[str, Any] | None:
    """The `start` event's data of a journal (its run's configuration), without reading the rest."""
    with open(path, "rb") as f:
        first = f.readline()
    if not first.endswith(b"\n"):
        return None
    try:
        event = JournalEvent.model_validate_json(first)
    except ValidationError:
        raise JournalError(f"{path}:1: corrupt journal: the first line is not a start event") from None
    if event.kind != "start":
        raise JournalError(f"{path}:1: corrupt journal: the first event is '{event.kind}', not 'start'")
    return event.data
