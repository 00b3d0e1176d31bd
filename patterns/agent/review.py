"""Review items and the one step that merges an accepted one.

    store = ReviewStore()                    # <agent home>/reviews/<id>.json, one file per item
    store.accept("kda_decode-1a2b3c4d5e", by="alice")
    store.reject("kda_decode-1a2b3c4d5e", by="alice", note="slower at B=512")

An item's id is the op and ten hex digits of the hash of the target's path
and the candidate's sha256, so writing the same candidate of the same target
twice (a resumed run, a second run) gives the same item, and a decided item is
never reopened.

Accept merges in one atomic step: the change goes into the target file
(`kernels/<op>/baseline.py` unless the run targeted another copy), the
serving registry gets a new version and makes it live, and the measured result
is appended to the pattern's `evidence.measured`. The commit point is a
write-ahead intent, `<id>.accept.json`, written (atomically) once every check
has passed and before anything changes. Each step after it is idempotent:

1. register the candidate in the registry (or find the version an interrupted
   accept already registered; its number is written into the intent);
2. write the target, unless it already holds the candidate;
3. record the measurement, unless it is already there: for a target that is
   a file of the project's kernels/, in the pattern's pattern.yaml (spliced
   with patterns.distill.merge, every other line kept); for any other file,
   in the user's evidence store (patterns.core.user_evidence), never in the
   installed library;
4. promote the version;
5. mark the item accepted (atomically) and delete the intent.

A crash before the intent changes nothing; a crash after it is finished by
`recover()`, which every review command and every agent run calls first. If
the target was changed by someone else in between, recovery stops with a
one-line error instead of overwriting it. Reject only marks the item.

A user's op (a spec.py from `patterns spec init`; `item.spec` names it) is not
served, so its accept has no registry steps: the target is written, the
measurement goes to the user's store, the item is marked.

What is recorded as measured: with a GPU bundle, the gate's geometric-mean
speed ratio over the op's GPU shapes (metric `speedup`). On a CPU there is no
speed, so the record is what the interpreter did measure: the candidate's
worst relative error over the correctness grid divided by the baseline's
(metric `max-rel-err-vs-baseline`; 1.0 for bit-identical outputs, below 1 is
more accurate). When neither can be formed (a candidate with zero error
against a baseline with some) nothing is appended and accept says so.

End to end: on a GPU, once an item is accepted, `patterns review accept` runs
the engine with the op's previous and new versions interleaved
(patterns.agent.endtoend) and `record_end_to_end` stores the result in the
item (`end_to_end`: the end-to-end ratio beside the kernel ratio, and a flag
when a kernel win did not show). It comes after the accept's commit point and
changes nothing the accept wrote: a comparison that fails leaves the accept as
it is.

Safety: `auto_merge_refusal` is the one rule for merging without a person:
only an exact, codemod-made rewrite whose gate passed with outputs
bit-identical to the baseline's. A model's patch, any numerics- or
concurrency-changing rewrite, or an "exact" one that changed a bit, needs a
person's accept.
"""
from __future__ import annotations

import datetime as dt
import hashlib
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

from pydantic import BaseModel, ConfigDict, ValidationError

from patterns.core import files
from patterns.core.records import EndToEnd, EvidenceBundle, ReviewItem
from patterns.core.schema import Measurement, Safety

INTENT_SUFFIX = ".accept.json"
AUTO = "agent (--auto-merge-exact)"


class ReviewError(ValueError):
    """Bad input to review (unknown id, decided item, stale target, corrupt file): one line, CLI exit 2."""


def agent_home() -> Path:
    """PATTERNS_AGENT_HOME, else the user data dir: runs/ (journals, candidates, evidence) and reviews/."""
    env = os.environ.get("PATTERNS_AGENT_HOME")
    if env:
        return Path(env)
    import platformdirs

    return Path(platformdirs.user_data_dir("patterns")) / "agent"


def review_id(op: str, target: Path, candidate_sha256: str) -> str:
    """Stable for one candidate of one target: the op and ten hex digits of their joint hash."""
    return f"{op}-{hashlib.sha256(f'{Path(target).resolve()}:{candidate_sha256}'.encode()).hexdigest()[:10]}"


def auto_merge_refusal(item: ReviewItem, bundle: EvidenceBundle) -> str:
    """Why the item may not merge without a person; "" when it may: an exact rewrite made by a codemod
    whose outputs the gate found bit-identical to the baseline's on every shape it ran."""
    if item.safety != Safety.exact:
        return f"{item.safety.value} ({item.safety.review})"
    if item.origin != "rewrite":
        return "a model's patch: a person must accept"
    correct = [c for c in bundle.checks if c.name == "correctness"]
    differs = [c for c in correct if not c.details.get("bit_identical_to_baseline")]
    if not correct or differs:
        where = ", ".join(f"{k}={v}" for k, v in differs[0].shape.items()) if differs else "no correctness check"
        return f"declared exact, but its outputs are not bit-identical to the baseline's ({where}): a person must accept"
    return ""


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def _shapes_summary(shapes: list[dict]) -> str:
    """`B=1/8/32, T=1, H=32`: the values each shape variable took, in order."""
    keys: list[str] = []
    for s in shapes:
        keys += [k for k in s if k not in keys]
    parts = []
    for k in keys:
        values: list[str] = []
        for s in shapes:
            v = str(s.get(k, "-"))
            if v not in values:
                values.append(v)
        parts.append(f"{k}={'/'.join(values)}")
    return ", ".join(parts)


def measurement(item: ReviewItem, bundle: EvidenceBundle) -> Measurement | None:
    """What the gate measured for this candidate, as a Measurement for the pattern's evidence (see the module doc)."""
    env = bundle.environment
    common = dict(
        baseline=_display(Path(item.target)),
        candidate=f"{item.pattern_id}({', '.join(f'{k}={v}' for k, v in item.params.items())})" + (" via a model's patch" if item.origin == "llm-patch" else ""),
        command=f"patterns validate {item.spec or item.op} {item.candidate} --device {item.device}",
        source=item.bundle,
    )
    overall = next((c for c in bundle.checks if c.name == "speed overall" and c.passed is not None), None)
    if overall is not None:
        speed = [c.shape for c in bundle.checks if c.name == "speed" and c.passed is not None]
        return Measurement(hardware=str(env.get("gpu") or env.get("device")), shapes=_shapes_summary(speed), ratio=round(overall.details["geomean_ratio"], 4), metric="speedup", **common)
    correct = [c for c in bundle.checks if c.name == "correctness" and c.passed]
    if not correct:
        return None
    hardware = "cpu, Triton interpreter" if env.get("interpreter") else str(env.get("gpu") or env.get("device"))
    shapes = _shapes_summary([c.shape for c in correct])
    if all(c.details.get("bit_identical_to_baseline") for c in correct):
        ratio = 1.0
    else:
        cand = max(c.details.get("max_rel_err", 0.0) for c in correct)
        base = max(c.details.get("baseline_max_rel_err", 0.0) for c in correct)
        if cand == base:
            ratio = 1.0
        elif base > 0 and cand > 0:
            ratio = float(f"{cand / base:.4g}")
        else:
            return None
    return Measurement(hardware=hardware, shapes=shapes, ratio=ratio, metric="max-rel-err-vs-baseline", **common)


def _display(path: Path) -> str:
    """A path relative to the working directory when it is under it (kernels/<op>/baseline.py), else absolute."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


class _Intent(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str
    measurement: Measurement | None = None
    registry_version: int | None = None
    by: str
    at: str


class ReviewStore:
    def __init__(self, root: Path | None = None, registry=None, evidence_root: Path | None = None):
        self.root = Path(root) if root is not None else agent_home() / "reviews"
        self._registry = registry
        self.evidence_root = evidence_root  # the user's evidence store (None: patterns.core.user_evidence's default)

    @property
    def registry(self):
        if self._registry is None:
            from patterns.serving.registry import Registry

            self._registry = Registry()
        return self._registry

    # ---------------------------------------------------------------- items
    def path(self, item_id: str) -> Path:
        return self.root / f"{item_id}.json"

    def get(self, item_id: str) -> ReviewItem:
        path = self.path(item_id)
        if "/" in item_id or not path.exists():
            known = ", ".join(i.id for i in self.list()[-5:]) or "none"
            raise ReviewError(f"no review item '{item_id}' in {self.root} (latest: {known})")
        return self._load(path)

    def _load(self, path: Path) -> ReviewItem:
        try:
            return ReviewItem.model_validate_json(path.read_bytes())
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(x) for x in err["loc"]) or "(root)"
            raise ReviewError(f"{path}: corrupt review item: {where}: {err['msg']}") from None

    def list(self, on_corrupt: Callable[[str], None] | None = None) -> list[ReviewItem]:
        """Every readable item, oldest first; a corrupt one is left out (and named to `on_corrupt`),
        so one bad file never hides the rest."""
        if not self.root.is_dir():
            return []
        items = []
        for p in self.root.glob("*.json"):
            if p.name.endswith(INTENT_SUFFIX):
                continue
            try:
                items.append(self._load(p))
            except ReviewError as exc:
                if on_corrupt is not None:
                    on_corrupt(f"skipped {exc}")
        return sorted(items, key=lambda i: (i.created, i.id))

    def put(self, item: ReviewItem) -> ReviewItem:
        """Store a new item; an item with the same id that exists already is kept as it is (and returned)."""
        with self._locked():
            path = self.path(item.id)
            if path.exists():
                return self._load(path)
            self._write(item)
            return item

    def _write(self, item: ReviewItem) -> None:
        files.write_atomic(self.path(item.id), (item.model_dump_json(indent=2) + "\n").encode())

    @contextmanager
    def _locked(self) -> Iterator[None]:
        from filelock import FileLock, Timeout

        self.root.mkdir(parents=True, exist_ok=True)
        lock = FileLock(str(self.root / ".lock"))
        try:
            lock.acquire(timeout=60)
        except Timeout:
            raise ReviewError(f"{self.root}: locked by another process for over 60 s") from None
        try:
            yield
        finally:
            lock.release()

    # ---------------------------------------------------------------- decisions
    def reject(self, item_id: str, *, by: str, note: str = "") -> ReviewItem:
        with self._locked():
            self._recover()
            item = self._pending(item_id)
            item = item.model_copy(update={"status": "rejected", "decided_by": by, "decided_at": _now(), "note": note})
            self._write(item)
            return item

    def accept(self, item_id: str, *, by: str, automatic: bool = False, note: str = "") -> tuple[ReviewItem, Measurement | None]:
        """Merge the item (see the module doc); returns the accepted item and the measurement recorded."""
        from patterns.validation.bundle import read_bundle

        with self._locked():
            self._recover()
            item = self._pending(item_id)
            candidate = Path(item.candidate)
            if not candidate.is_file() or files.sha256_file(candidate) != item.candidate_sha256:
                raise ReviewError(f"{candidate}: the candidate is missing or changed since it was validated")
            try:
                bundle = read_bundle(Path(item.bundle))
            except (OSError, ValueError) as exc:
                raise ReviewError(f"{item.bundle}: cannot read the evidence bundle: {str(exc).splitlines()[0]}") from None
            if not bundle.passed:
                raise ReviewError(f"{item.bundle}: the gate did not pass: nothing to merge")
            refusal = auto_merge_refusal(item, bundle) if automatic else ""
            if refusal:
                raise ReviewError(f"{item.id}: not merged automatically: {refusal}")
            target = Path(item.target)
            if not target.is_file() or files.sha256_file(target) != item.target_sha256:
                raise ReviewError(f"{target}: changed since the candidate was made from it: run the agent again")
            # an unknown pattern or an unreadable registry fails here, before the commit point
            self._pattern_file(item)
            if self._serves(item):
                self.registry.live(item.op)
            intent = _Intent(id=item.id, measurement=measurement(item, bundle), by=by, at=_now())
            self._write_intent(intent)  # the commit point
            item = self._finish(item, intent, note)
            return item, intent.measurement

    def record_end_to_end(self, item_id: str, e2e: EndToEnd) -> ReviewItem:
        """Store the end-to-end judgement of an accepted item (patterns.agent.endtoend)."""
        with self._locked():
            item = self.get(item_id)
            if item.status != "accepted" or item.registry_version != e2e.new_version:
                raise ReviewError(f"{item.id}: end to end judges v{e2e.new_version}, the item is {item.status} as v{item.registry_version}")
            item = item.model_copy(update={"end_to_end": e2e})
            self._write(item)
            return item

    def recover(self) -> list[str]:
        """Finish every accept a crash interrupted after its commit point; the ids finished."""
        if not self.root.is_dir():
            return []
        with self._locked():
            return self._recover()

    def _recover(self) -> list[str]:
        done = []
        for path in sorted(self.root.glob(f"*{INTENT_SUFFIX}")):
            try:
                intent = _Intent.model_validate_json(path.read_bytes())
            except ValidationError:
                raise ReviewError(f"{path}: corrupt accept intent: finish or undo that accept by hand, then delete the file") from None
            item = self._load(self.path(intent.id))
            if item.status != "accepted":
                self._finish(item, intent, "")
            path.unlink(missing_ok=True)
            done.append(intent.id)
        return done

    def _pending(self, item_id: str) -> ReviewItem:
        item = self.get(item_id)
        if item.status != "pending":
            raise ReviewError(f"{item.id}: already {item.status} by {item.decided_by} at {item.decided_at}")
        return item

    def _write_intent(self, intent: _Intent) -> None:
        files.write_atomic(self.root / f"{intent.id}{INTENT_SUFFIX}", intent.model_dump_json(indent=2).encode())

    def _pattern_file(self, item: ReviewItem) -> Path:
        from patterns.core.library import get

        return get(item.pattern_id).file("pattern.yaml")

    @staticmethod
    def _serves(item: ReviewItem) -> bool:
        """Whether the item's op is one the serving registry holds (an op of kernels/, not a user's spec)."""
        return not item.spec

    @staticmethod
    def in_library(item: ReviewItem) -> bool:
        """Whether the target is a file of the project's kernels/: only then does an accept's measurement
        go into the library's pattern.yaml; any other file's goes to the user's evidence store."""
        from patterns.core.ops import OpError, kernels_dir

        try:
            return Path(item.target).resolve().is_relative_to(kernels_dir().resolve())
        except OpError:
            return False

    def _finish(self, item: ReviewItem, intent: _Intent, note: str) -> ReviewItem:
        """Steps 1-5 of the module doc; each one idempotent."""
        if not self._serves(item):
            return self._finish_user(item, intent, note)
        from patterns.distill.merge import append_measured
        from patterns.core.library import load_pattern
        reg = self.registry
        bundle = str(Path(item.bundle).resolve())
        if intent.registry_version is None:
            same = [v for v in reg.history(item.op) if v.sha256 == item.candidate_sha256 and v.pattern == item.pattern_id and v.bundle == bundle]
            version = same[-1] if same else reg.register(
                item.op, Path(item.candidate), symbol=item.symbol, pattern=item.pattern_id, bundle=Path(item.bundle), accepted_by=intent.by
            )
            intent = intent.model_copy(update={"registry_version": version.version})
            self._write_intent(intent)
        impl = next(v for v in reg.history(item.op) if v.version == intent.registry_version)
        source = Path(impl.file).read_bytes()  # the registry's immutable copy: the run folder may be gone

        target = Path(item.target)
        current = files.sha256_file(target) if target.exists() else ""
        if current != item.candidate_sha256:
            if current != item.target_sha256:
                raise ReviewError(f"{target}: changed by someone else during the accept of {item.id}: not overwritten; merge by hand or reject")
            files.write_atomic(target, source, keep_mode=True)

        if intent.measurement is not None and self.in_library(item):
            yaml_path = self._pattern_file(item)
            have = load_pattern(yaml_path).evidence.measured
            if intent.measurement not in have:
                text = yaml_path.read_text(encoding="utf-8")
                files.write_atomic(yaml_path, append_measured(text, [intent.measurement], str(yaml_path)).encode(), keep_mode=True)
        else:
            self._record_user(item, intent)

        reg.promote(item.op, intent.registry_version)
        item = item.model_copy(update={
            "status": "accepted", "decided_by": intent.by, "decided_at": intent.at, "registry_version": intent.registry_version,
            "note": note or item.note,
        })
        self._write(item)
        (self.root / f"{item.id}{INTENT_SUFFIX}").unlink(missing_ok=True)
        return item

    def _finish_user(self, item: ReviewItem, intent: _Intent, note: str) -> ReviewItem:
        """A user's op (no registry): write the target, record the measurement in the user's store, mark accepted."""
        target = Path(item.target)
        current = files.sha256_file(target) if target.exists() else ""
        if current != item.candidate_sha256:
            if current != item.target_sha256:
                raise ReviewError(f"{target}: changed by someone else during the accept of {item.id}: not overwritten; merge by hand or reject")
            files.write_atomic(target, Path(item.candidate).read_bytes(), keep_mode=True)
        self._record_user(item, intent)
        item = item.model_copy(update={"status": "accepted", "decided_by": intent.by, "decided_at": intent.at, "note": note or item.note})
        self._write(item)
        (self.root / f"{item.id}{INTENT_SUFFIX}").unlink(missing_ok=True)
        return item

    def _record_user(self, item: ReviewItem, intent: _Intent) -> None:
        from patterns.core.user_evidence import UserRecord, add

        if intent.measurement is not None:
            add(UserRecord(measurement=intent.measurement, pattern_id=item.pattern_id, item=item.id, op=item.spec or item.op,
                           target=item.target, recorded=intent.at), self.evidence_root)
