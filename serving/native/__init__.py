"""Native code of the serving stack: C sources built on first use with the machine's C compiler.

    ctypes.CDLL(str(library("wait")))

Each library is compiled once per source content into the user cache
(`$CC`, default `cc`; any machine that runs Triton on a GPU has one, Triton
builds its launchers with it) and written atomically, so concurrent first uses
and a crash mid-build never leave a broken library behind.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

HERE = Path(__file__).parent


class NativeBuildError(RuntimeError):
    """A native library could not be built: one line naming the source and the reason."""


def cache_dir() -> Path:
    import platformdirs

    return Path(os.environ.get("PATTERNS_NATIVE_CACHE") or Path(platformdirs.user_cache_dir("patterns")) / "native")


def library(name: str) -> Path:
    """The shared library built from `serving/native/<name>.c`."""
    source = HERE / f"{name}.c"
    data = source.read_bytes()
    compiler = os.environ.get("CC", "cc")
    out = cache_dir() / f"lib{name}-{hashlib.sha256(data + compiler.encode()).hexdigest()[:16]}.so"
    if out.exists():
        return out
    if shutil.which(compiler) is None:
        raise NativeBuildError(f"{source}: cannot build: no C compiler '{compiler}' on PATH (set CC)")
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=out.parent, prefix=f".{out.name}.", suffix=".tmp")
    os.close(fd)
    try:
        done = subprocess.run([compiler, "-O2", "-shared", "-fPIC", "-o", tmp, str(source)], capture_output=True, text=True)
        if done.returncode != 0:
            first = (done.stderr.strip().splitlines() or ["no message"])[0]
            raise NativeBuildError(f"{source}: {compiler} failed: {first}")
        os.replace(tmp, out)
    finally:
        Path(tmp).unlink(missing_ok=True)
    return out
