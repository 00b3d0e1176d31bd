"""Per-thread timelines, written as Chrome trace JSON (open in https://ui.perfetto.dev or chrome://tracing).

    timeline = Timeline()
    with timeline.span("wait L3", native=True):
        wait_for_device(...)
    write_trace(Path("prefill.json"), {"prefill alone": timeline})

A span is stamped with `time.perf_counter_ns()` on entry and exit by the
thread that runs it, under the GIL, so two spans around calls that hold the
GIL can never overlap in time: the timeline shows the missing overlap
structurally, whatever the machine's load.
"""
from __future__ import annotations

import json
import os
import tempfile
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator


@dataclass(frozen=True)
class Span:
    thread: str
    name: str
    start_ns: int
    end_ns: int
    args: dict[str, Any] = field(default_factory=dict)


class Timeline:
    """Spans recorded by any number of threads (list.append is atomic under the GIL)."""

    def __init__(self) -> None:
        self.spans: list[Span] = []

    @contextmanager
    def span(self, name: str, **args: Any) -> Iterator[None]:
        start = time.perf_counter_ns()
        try:
            yield
        finally:
            self.spans.append(Span(threading.current_thread().name, name, start, time.perf_counter_ns(), args))

    def add(self, name: str, start_ns: int, end_ns: int, **args: Any) -> None:
        """A span measured by hand (e.g. from a hand-off in one thread to the pick-up in this one)."""
        self.spans.append(Span(threading.current_thread().name, name, start_ns, end_ns, args))

    def threads(self) -> list[str]:
        return list(dict.fromkeys(s.thread for s in self.spans))

    def intervals(self, thread: str, **args: Any) -> list[tuple[int, int]]:
        """Sorted (start, end) of the thread's spans whose args include `args`."""
        return sorted((s.start_ns, s.end_ns) for s in self.spans if s.thread == thread and all(s.args.get(k) == v for k, v in args.items()))


def overlap_ns(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> int:
    """Total time covered by both interval lists (each sorted, its intervals disjoint)."""
    total, i, j = 0, 0, 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        total += max(0, hi - lo)
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


def chrome_trace(timelines: dict[str, Timeline]) -> dict[str, Any]:
    """One trace process per timeline (named by its key), one track per thread, times in µs from its first span."""
    events: list[dict[str, Any]] = []
    tids: dict[str, int] = {}
    for pid, (label, timeline) in enumerate(timelines.items(), start=1):
        events.append({"ph": "M", "pid": pid, "name": "process_name", "args": {"name": label}})
        first = min((s.start_ns for s in timeline.spans), default=0)
        for thread in timeline.threads():
            tid = tids.setdefault(thread, len(tids) + 1)
            events.append({"ph": "M", "pid": pid, "tid": tid, "name": "thread_name", "args": {"name": thread}})
        for s in timeline.spans:
            # each process starts at 0 so that runs recorded one after the other line up
            events.append({
                "ph": "X", "pid": pid, "tid": tids[s.thread], "name": s.name, "cat": "native" if s.args.get("native") else "python",
                "ts": (s.start_ns - first) / 1e3, "dur": (s.end_ns - s.start_ns) / 1e3, "args": s.args,
            })
    return {"traceEvents": events, "displayTimeUnit": "ms"}


def write_trace(path: Path, timelines: dict[str, Timeline]) -> Path:
    """Write the Chrome trace atomically (temporary file + rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(chrome_trace(timelines), f)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
