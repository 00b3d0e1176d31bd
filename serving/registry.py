"""Which implementation of each op is live: the serving registry.

    reg = Registry()                      # PATTERNS_REGISTRY, the checkout's serving/registry/, or the user data dir
    reg.live("kda_decode")                # LiveImpl; version 1 (kernels/kda_decode/baseline.py) is seeded on first use
    v = reg.register("kda_decode", Path("cand.py"), symbol="kda_decode", pattern="fuse_v_tiles",
                     bundle=Path("ev.json"), accepted_by="alice")
    reg.promote("kda_decode", v.version)  # now live
    reg.rollback("kda_decode")            # the version that was live before
    fn = load_live("kda_decode")          # the live file's entry point, imported
    fn = load_impl(reg.version("kda_decode", 1))   # any registered version's (the engine's A/B runs)

On disk, under the registry root:

    registry.json        {"format": 1, "ops": {op: {"live": N, "trail": [...], "versions": [LiveImpl, ...]}}}
    registry.json.lock   the filelock every read-modify-write holds
    objects/<sha256>.py  each version's source, content-addressed

Why content-addressed copies: a rollback needs the old code even after
`kernels/<op>/baseline.py` has been rewritten by an accepted change, so every
version's source is copied, once, into a file named by its sha256. Such a
file never changes (same name, same bytes); `load_live` re-hashes it before
importing and refuses a copy that no longer matches. Versions must use
absolute imports (the copy lives outside the op's package), which holds for
every baseline and for every candidate the gate accepts.

Durability: every change runs under the lock, reads the current file, and
writes the new one to a temporary file that is fsynced and renamed over
`registry.json` (the commit point); the object a new version points to is
written, also atomically, before that rename. A crash leaves either the old
or the new registry, at worst with an unreferenced object. A registry file
that does not parse is reported (one line, `RegistryError`) and never
overwritten. `trail` is the sequence of versions that were made live;
`rollback` pops it, so repeated rollbacks walk back through what was served.
"""
from __future__ import annotations

import datetime as dt
import importlib.util
import os
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from patterns.core.files import sha256_hex, write_atomic
from patterns.core.records import LiveImpl

FORMAT = 1
REGISTRY_FILE = "registry.json"
OBJECTS = "objects"
LOCK_TIMEOUT_S = 60.0
SEED_ACCEPTED_BY = "seed"


class RegistryError(ValueError):
    """Bad input to the registry or a registry that cannot be read: one line, CLI exit 2."""


class _OpRecord(BaseModel):
    model_config = ConfigDict(extra="forbid")
    live: int
    trail: list[int] = Field(min_length=1, description="versions made live, oldest first; the last is live")
    versions: list[LiveImpl] = Field(min_length=1)


class _Store(BaseModel):
    model_config = ConfigDict(extra="forbid")
    format: int = FORMAT
    ops: dict[str, _OpRecord] = Field(default_factory=dict)


def default_root() -> Path:
    """PATTERNS_REGISTRY; else serving/registry/ of a source checkout (editable install); else the user data dir."""
    env = os.environ.get("PATTERNS_REGISTRY")
    if env:
        if Path(env).exists() and not Path(env).is_dir():
            raise RegistryError(f"PATTERNS_REGISTRY={env}: not a folder (the registry is a folder of its own)")
        return Path(env)
    here = Path(__file__).resolve().parent
    if (here.parent / "setup.py").is_file() and (here.parent / "kernels").is_dir():
        return here / "registry"
    import platformdirs

    return Path(platformdirs.user_data_dir("patterns")) / "registry"


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def _baseline(op: str) -> tuple[Path, str]:
    """The op's baseline file and launcher name, from its spec (the one place that declares them)."""
    from patterns.core.ops import OpError, available_ops, load_spec, source_path, split_target

    if op not in available_ops():
        raise RegistryError(f"unknown op '{op}' (known: {', '.join(available_ops()) or 'none'})")
    try:
        spec = load_spec(op)
        return source_path(spec, spec.baseline), split_target(spec.baseline)[1]
    except OpError as exc:
        raise RegistryError(str(exc)) from None


class Registry:
    def __init__(self, root: Path | None = None):
        self.root = Path(root) if root is not None else default_root()
        self.path = self.root / REGISTRY_FILE

    # ---------------------------------------------------------------- reading
    def status(self) -> dict[str, LiveImpl]:
        """op -> live version, for every op of kernels/ (unseeded ops are seeded with their baseline)."""
        from patterns.core.ops import available_ops

        with self._locked() as store:
            for op in available_ops():
                self._seed(store, op)
            return {op: self._resolve(self._find(rec, rec.live)) for op, rec in sorted(store.ops.items())}

    def live(self, op: str) -> LiveImpl:
        with self._locked() as store:
            rec = self._seed(store, op)
            return self._resolve(self._find(rec, rec.live))

    def version(self, op: str, version: int) -> LiveImpl:
        """One registered version of `op`, live or not."""
        with self._locked() as store:
            return self._resolve(self._find(self._seed(store, op), version))

    def history(self, op: str) -> list[LiveImpl]:
        """Every registered version of `op`, oldest first."""
        with self._locked() as store:
            rec = self._seed(store, op)
            return [self._resolve(v) for v in rec.versions]

    def trail(self, op: str) -> list[int]:
        """The versions that were made live, oldest first (the last one is live)."""
        with self._locked() as store:
            return list(self._seed(store, op).trail)

    # ---------------------------------------------------------------- changing
    def register(self, op: str, source_file: Path, *, symbol: str, pattern: str, bundle: Path | None, accepted_by: str) -> LiveImpl:
        """A new version of `op` from `source_file` (copied, content-addressed); not live until promoted."""
        source_file = Path(source_file)
        try:
            data = source_file.read_bytes()
        except OSError as exc:
            raise RegistryError(f"{source_file}: cannot read: {exc.strerror or exc}") from None
        if not symbol.isidentifier():
            raise RegistryError(f"{source_file}: symbol '{symbol}' is not a Python name")
        if not accepted_by.strip():
            raise RegistryError("accepted_by: who accepted the version must be named")
        with self._locked() as store:
            rec = self._seed(store, op)
            impl = LiveImpl(
                op=op, version=max(v.version for v in rec.versions) + 1, file=self._store_object(data), symbol=symbol,
                sha256=sha256_hex(data), pattern=pattern, bundle=str(Path(bundle).resolve()) if bundle else "",
                accepted_by=accepted_by, accepted_at=_now(), origin=str(source_file),
            )
            rec.versions.append(impl)
            self._commit(store)
            return self._resolve(impl)

    def promote(self, op: str, version: int) -> LiveImpl:
        with self._locked() as store:
            rec = self._seed(store, op)
            impl = self._find(rec, version)
            if rec.live != version:
                rec.live = version
                rec.trail.append(version)
                self._commit(store)
            return self._resolve(impl)

    def rollback(self, op: str) -> LiveImpl:
        """Make the version that was live before the current one live again."""
        with self._locked() as store:
            rec = self._seed(store, op)
            if len(rec.trail) < 2:
                raise RegistryError(f"{op}: nothing to roll back to (version {rec.live} is the only one that was live)")
            rec.trail.pop()
            rec.live = rec.trail[-1]
            self._commit(store)
            return self._resolve(self._find(rec, rec.live))

    # ---------------------------------------------------------------- internals
    @contextmanager
    def _locked(self) -> Iterator[_Store]:
        from filelock import FileLock, Timeout

        self.root.mkdir(parents=True, exist_ok=True)
        lock = FileLock(str(self.path) + ".lock")
        try:
            lock.acquire(timeout=LOCK_TIMEOUT_S)
        except Timeout:
            raise RegistryError(f"{self.path}: locked by another process for over {LOCK_TIMEOUT_S:.0f} s") from None
        try:
            store = self._read()
            self._dirty = False
            yield store
            if self._dirty:
                self._commit(store)
        finally:
            lock.release()

    def _read(self) -> _Store:
        if not self.path.exists():
            return _Store()
        try:
            store = _Store.model_validate_json(self.path.read_bytes())
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(x) for x in err["loc"]) or "(root)"
            raise RegistryError(f"{self.path}: corrupt registry (left untouched): {where}: {err['msg']}") from None
        except OSError as exc:
            raise RegistryError(f"{self.path}: cannot read: {exc.strerror or exc}") from None
        if store.format != FORMAT:
            raise RegistryError(f"{self.path}: registry format {store.format}, this version reads {FORMAT}")
        for op, rec in store.ops.items():
            known = {v.version for v in rec.versions}
            if rec.live not in known or any(t not in known for t in rec.trail) or rec.trail[-1] != rec.live:
                raise RegistryError(f"{self.path}: corrupt registry (left untouched): ops.{op}: live/trail name versions that do not exist")
        return store

    def _commit(self, store: _Store) -> None:
        write_atomic(self.path, (store.model_dump_json(indent=2) + "\n").encode())
        self._dirty = False

    def _seed(self, store: _Store, op: str) -> _OpRecord:
        if op in store.ops:
            return store.ops[op]
        path, symbol = _baseline(op)
        data = path.read_bytes()
        v1 = LiveImpl(
            op=op, version=1, file=self._store_object(data), symbol=symbol, sha256=sha256_hex(data),
            accepted_by=SEED_ACCEPTED_BY, accepted_at=_now(), origin=str(path),
        )
        store.ops[op] = _OpRecord(live=1, trail=[1], versions=[v1])
        self._dirty = True
        return store.ops[op]

    def _find(self, rec: _OpRecord, version: int) -> LiveImpl:
        for v in rec.versions:
            if v.version == version:
                return v
        known = ", ".join(str(v.version) for v in rec.versions)
        raise RegistryError(f"{rec.versions[0].op}: no version {version} (versions: {known})")

    def _store_object(self, data: bytes) -> str:
        rel = f"{OBJECTS}/{sha256_hex(data)}.py"
        path = self.root / rel
        if not path.exists():
            write_atomic(path, data)
        return rel

    def _resolve(self, impl: LiveImpl) -> LiveImpl:
        return impl.model_copy(update={"file": str(self.root / impl.file)})


def load_live(op: str, registry: Registry | None = None) -> Callable:
    """The live implementation's entry point (`load_impl` of the registry's live version)."""
    return load_impl((registry or Registry()).live(op))


def load_impl(impl: LiveImpl) -> Callable:
    """A version's entry point, imported from its immutable copy (verified by sha256).

    A version is imported once per process (module name from its hash), so
    repeated calls return the same function and Triton's JIT cache is kept.
    """
    op = impl.op
    path = Path(impl.file)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise RegistryError(f"{path}: {op} v{impl.version}: cannot read: {exc.strerror or exc}") from None
    if sha256_hex(data) != impl.sha256:
        raise RegistryError(f"{path}: {op} v{impl.version}: content does not match its sha256 (the copy was changed)")
    name = f"_patterns_live_{op}_{impl.sha256[:16]}"
    module = sys.modules.get(name)
    if module is None:
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except Exception as exc:  # noqa: BLE001 - an import failure of a live file is named in one line
            sys.modules.pop(name, None)
            raise RegistryError(f"{path}: {op} v{impl.version} failed to import: {type(exc).__name__}: {exc}") from None
    fn = getattr(module, impl.symbol, None)
    if not callable(fn):
        raise RegistryError(f"{path}: {op} v{impl.version} has no entry point '{impl.symbol}'")
    return fn
