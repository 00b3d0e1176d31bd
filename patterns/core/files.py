"""Files a reader or a crash never sees half of, and the content hashes that name them.

One place for both, because every stage writes state a user relies on (facts and
index caches, evidence bundles, the serving registry, review items, rewritten
kernels) and compares content by hash (a rewrite's original, a registry object,
a review's candidate).
"""
from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path


def sha256_hex(data: bytes | str) -> str:
    return hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()


def sha256_file(path: Path | str) -> str:
    """Read in chunks: upstream wheels are large."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


# read once, at import (os.umask can only be read by setting it)
_UMASK = os.umask(0o022)
os.umask(_UMASK)


def write_atomic(path: Path | str, data: bytes | str, *, keep_mode: bool = False, durable: bool = True) -> None:
    """A temporary file in the same folder renamed over `path`: the old content or the new, never half.

    `durable`: fsync the file and its folder before returning, for state a crash must not
    lose (registry, reviews, bundles, a user's file); caches that can be rebuilt skip it.
    `keep_mode`: the new file gets the permissions of the one it replaces (a user's source file).
    """
    path = Path(path)
    raw = data.encode("utf-8") if isinstance(data, str) else data
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
            if durable:
                f.flush()
                os.fsync(f.fileno())
        if keep_mode and path.exists():
            shutil.copymode(path, tmp)
        else:  # mkstemp's 0600 would make every generated file private to its writer
            os.chmod(tmp, 0o666 & ~_UMASK)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    if durable:
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


class FolderError(ValueError):
    """A generated folder cannot be written where asked; one line."""


def writable_folder(path: Path, what: str) -> Path:
    """`path` as a folder this process can write `what` into (created if missing); FolderError, one line, if not.
    Checked before long work, so a result is never lost to an unwritable destination after it."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise FolderError(f"{path}: not a folder ({what} is written into a folder)")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise FolderError(f"{path}: cannot create the folder for {what} ({e.strerror or e})") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise FolderError(f"{path}: folder is not writable ({what})")
    return path


def write_folder(out: Path, files: dict[str, str], marker: str, what: str) -> None:
    """Write a generated folder (the catalog, the skill) whole: `files` (relative path -> text) and `marker`
    go into a temporary folder beside `out`, which replaces it at the end, so a failure leaves the previous
    one in place. Only an empty folder or one holding `marker` (an earlier output) is ever replaced."""
    out = Path(os.path.abspath(out))
    if out.is_symlink() or (out.exists() and not out.is_dir()):
        raise FolderError(f"{out}: not a folder; the {what} needs a folder of its own")
    if out.is_dir() and any(out.iterdir()) and not (out / marker).exists():
        raise FolderError(f"{out}: folder is not empty and holds no {what} ({marker} missing); refusing to replace it")
    writable_folder(out.parent, f"the {what}")
    try:
        tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent))
    except OSError as e:
        raise FolderError(f"{out.parent}: cannot write the {what} there ({e.strerror or e})") from None
    try:
        os.chmod(tmp, 0o755)
        for rel, text in files.items():
            (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
            (tmp / rel).write_text(text, encoding="utf-8")
        (tmp / marker).write_text(f"written by patterns: this {what} is replaced as a whole\n")
        _swap_in(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _swap_in(tmp: Path, out: Path) -> None:
    """Move tmp to out. An old out is moved aside first and deleted only after."""
    if not out.exists():
        os.rename(tmp, out)
        return
    old = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".old", dir=out.parent))
    os.rename(out, old / out.name)
    try:
        os.rename(tmp, out)
    except BaseException:
        os.rename(old / out.name, out)  # put the previous folder back
        old.rmdir()
        raise
    shutil.rmtree(old, ignore_errors=True)
