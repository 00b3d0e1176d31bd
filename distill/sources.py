"""Where upstream code comes from: a folder, a wheel or sdist, an installed package, or a PyPI requirement.

A requirement (`fla-core==0.6.0`) is fetched with `pip download --no-deps` into
the user cache and read straight from the archive: nothing is installed or
imported. Every file read is hashed (sha256); the hash is the cache key of its
facts and is recorded with the evidence.
"""
from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from patterns.distill.errors import DistillError

from patterns.core.files import sha256_file

# distribution name -> UpstreamLocation.project
PROJECTS = {"fla-core": "fla", "flash-linear-attention": "fla", "sglang": "sglang", "sgl-deep-gemm": "deepgemm", "deep-gemm": "deepgemm", "deep-ep": "deepep"}
# top-level package -> project, for folders and installed packages
PACKAGES = {"fla": "fla", "sglang": "sglang", "deep_gemm": "deepgemm", "deep_ep": "deepep"}
MAX_FILE_BYTES = 2_000_000


def cache_dir() -> Path:
    """The user cache (PATTERNS_CACHE_DIR overrides, e.g. in tests)."""
    env = os.environ.get("PATTERNS_CACHE_DIR")
    if env:
        return Path(env)
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("patterns"))


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass
class Member:
    """One file of a source tree, read lazily."""

    path: str  # relative, '/'-separated
    size: int
    skip: str = ""  # why it is not read at all (link leaves the tree, ...)
    _read: object = None

    def read(self) -> bytes:
        return self._read()  # type: ignore[operator]


@dataclass
class Source:
    spec: str
    project: str
    version: str
    origin: str  # the folder or archive read
    kind: str  # folder | wheel | sdist | installed
    sha256: str = ""  # of the archive, when there is one
    _members: list[Member] = field(default_factory=list)

    def members(self) -> list[Member]:
        return self._members


def _project_for(name: str, fallback: str) -> str:
    return PROJECTS.get(_norm(name), PACKAGES.get(name, fallback))


# -- archives -----------------------------------------------------------------------------


def _safe_rel(name: str) -> bool:
    parts = name.split("/")
    return not name.startswith("/") and ".." not in parts and not re.match(r"^[A-Za-z]:", name)


def open_wheel(path: Path, spec: str = "") -> Source:
    try:
        zf = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as exc:
        raise DistillError(f"{path}: not a readable wheel ({exc})") from None
    m = re.match(r"^(?P<name>[^-]+)-(?P<version>[^-]+)", path.name)
    name, version = (m["name"], m["version"]) if m else (path.stem, "unknown")
    for info in zf.infolist():  # METADATA is authoritative
        if info.filename.endswith(".dist-info/METADATA"):
            text = zf.read(info).decode("utf-8", "replace")
            n = re.search(r"^Name:\s*(\S+)", text, re.M)
            v = re.search(r"^Version:\s*(\S+)", text, re.M)
            name, version = (n[1] if n else name), (v[1] if v else version)
            break
    members = []
    for info in zf.infolist():
        if info.is_dir():
            continue
        mode = info.external_attr >> 16
        skip = ""
        if not _safe_rel(info.filename):
            skip = "path leaves the tree"
        elif stat.S_ISLNK(mode):
            skip = "link"
        members.append(Member(info.filename, info.file_size, skip, (lambda i=info: zf.read(i))))
    return Source(spec or str(path), _project_for(name, _norm(name)), version, str(path), "wheel", sha256_file(path), members)


def open_sdist(path: Path, spec: str = "") -> Source:
    try:
        tf = tarfile.open(path)
    except (tarfile.TarError, OSError) as exc:
        raise DistillError(f"{path}: not a readable sdist ({exc})") from None
    m = re.match(r"^(?P<name>.+)-(?P<version>[^-]+)\.tar\.gz$", path.name)
    name, version = (m["name"], m["version"]) if m else (path.name, "unknown")
    members = []
    for info in tf.getmembers():
        if info.isdir():
            continue
        rel = info.name.split("/", 1)[1] if "/" in info.name else info.name  # drop <name>-<version>/
        skip = "" if _safe_rel(info.name) else "path leaves the tree"
        if info.issym() or info.islnk():
            skip = "link"
        elif not info.isfile():
            skip = "not a regular file"
        members.append(Member(rel, info.size, skip, (lambda i=info: tf.extractfile(i).read())))
    return Source(spec or str(path), _project_for(name, _norm(name)), version, str(path), "sdist", sha256_file(path), members)


# -- folders and installed packages -----------------------------------------------------------


def _folder_members(root: Path, files: list[Path] | None = None) -> list[Member]:
    root_real = root.resolve()
    out = []
    if files is None:
        files = []
        for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
            d = Path(dirpath)
            for dn in list(dirnames):
                if dn.startswith(".") or dn in ("__pycache__", "node_modules"):
                    dirnames.remove(dn)
                elif (d / dn).is_symlink():
                    files.append(d / dn)  # reported as a skipped link below
                    dirnames.remove(dn)
            files.extend(d / fn for fn in filenames)
    for p in sorted(files):
        rel = p.relative_to(root).as_posix() if p.is_relative_to(root) else p.as_posix()
        try:
            st = p.lstat()
            skip = ""
            if stat.S_ISLNK(st.st_mode):
                target = p.resolve()
                if not target.is_relative_to(root_real):
                    skip = "link leaves the tree"
                elif target.is_dir():
                    skip = "link to a folder"
                else:
                    st = target.stat()
            elif not stat.S_ISREG(st.st_mode):
                skip = "not a regular file"
        except OSError as exc:  # bad input: a file of the tree that cannot be read stops the run
            raise DistillError(f"{p}: cannot read ({exc.strerror or type(exc).__name__})") from None
        out.append(Member(rel, st.st_size, skip, (lambda p=p: p.read_bytes())))
    return out


def _folder_version(root: Path) -> tuple[str, str]:
    for meta in list(root.glob("*.dist-info/METADATA")) + list(root.glob("PKG-INFO")):
        text = meta.read_text(encoding="utf-8", errors="replace")
        n, v = re.search(r"^Name:\s*(\S+)", text, re.M), re.search(r"^Version:\s*(\S+)", text, re.M)
        if n and v:
            return n[1], v[1]
    pyproject = root / "pyproject.toml"
    if pyproject.exists():
        text = pyproject.read_text(encoding="utf-8", errors="replace")
        n, v = re.search(r'^name\s*=\s*"([^"]+)"', text, re.M), re.search(r'^version\s*=\s*"([^"]+)"', text, re.M)
        if n:
            return n[1], v[1] if v else "local"
    return "", "local"


def open_folder(root: Path, spec: str = "") -> Source:
    name, version = _folder_version(root)
    project = _project_for(name, "") if name else ""
    if not project:
        pkgs = [p.name for p in root.iterdir() if p.is_dir() and p.name in PACKAGES] if root.is_dir() else []
        project = PACKAGES[pkgs[0]] if pkgs else PACKAGES.get(root.name, _norm(name or root.name))
    return Source(spec or str(root), project, version, str(root), "folder", "", _folder_members(root))


def open_installed(name: str) -> Source | None:
    from importlib import metadata

    try:
        dist = metadata.distribution(name)
    except metadata.PackageNotFoundError:
        return None
    files = [Path(dist.locate_file(f)) for f in (dist.files or []) if not str(f).endswith((".pyc",))]
    base = Path(dist.locate_file(""))
    files = [f for f in files if f.is_relative_to(base) and (f.exists() or f.is_symlink())]
    dist_name = dist.metadata["Name"] or name
    return Source(name, _project_for(dist_name, _norm(dist_name)), dist.version, str(base), "installed", "", _folder_members(base, files))


# -- requirements ---------------------------------------------------------------------------


def _find_archive(folder: Path, name: str, version: str | None) -> Path | None:
    want = _norm(name).replace("-", "_")
    for p in sorted(folder.glob("*")):
        m = re.match(r"^(.+?)-(\d[^-]*?)(-.*\.whl|\.tar\.gz|\.zip)$", p.name)
        if m and _norm(m[1]).replace("-", "_") == want and (version is None or m[2] == version):
            return p
    return None


def download(requirement: str) -> Path:
    """`pip download --no-deps` into the user cache (once); returns the archive."""
    from packaging.requirements import InvalidRequirement, Requirement

    try:
        req = Requirement(requirement)
    except InvalidRequirement as exc:
        raise DistillError(f"'{requirement}': not a folder, an installed package or a valid requirement ({exc})") from None
    pinned = None
    specs = list(req.specifier)
    if len(specs) == 1 and specs[0].operator in ("==", "==="):
        pinned = specs[0].version
    dest = cache_dir() / "upstream"
    dest.mkdir(parents=True, exist_ok=True)
    if pinned:
        found = _find_archive(dest, req.name, pinned)
        if found is not None:
            return found
    before = set(dest.iterdir())
    # wheels only: an sdist would run its build backend (upstream code) just to read its metadata
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--disable-pip-version-check", "-q",
           "--dest", str(dest), requirement]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise DistillError(f"cannot download '{requirement}': {exc}") from None
    if proc.returncode != 0:
        lines = [ln.strip() for ln in (proc.stderr or proc.stdout).splitlines() if ln.strip().startswith("ERROR")]
        why = lines[-1].removeprefix("ERROR:").strip() if lines else f"pip exited with {proc.returncode}"
        raise DistillError(f"cannot download '{requirement}': {why}")
    found = _find_archive(dest, req.name, pinned)
    if found is None:
        new = sorted(set(dest.iterdir()) - before)
        if not new:
            raise DistillError(f"cannot download '{requirement}': pip saved no archive")
        found = new[0]
    return found


def open_archive(path: Path, spec: str = "") -> Source:
    if path.suffix == ".whl":
        return open_wheel(path, spec)
    if path.name.endswith((".tar.gz", ".tgz")):
        return open_sdist(path, spec)
    if path.suffix == ".zip":
        return open_wheel(path, spec)
    raise DistillError(f"{path}: not a wheel, an sdist or a folder")


def resolve(spec: str) -> Source:
    """A SOURCE argument: an existing path, then an installed distribution, then a PyPI requirement."""
    p = Path(spec).expanduser()
    if p.exists():
        return open_folder(p, spec) if p.is_dir() else open_archive(p, spec)
    if re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", spec):
        installed = open_installed(spec)
        if installed is not None:
            return installed
    looks_local = any(ch in spec for ch in "/\\") or spec.startswith((".", "~")) or spec.endswith((".whl", ".tar.gz", ".tgz", ".zip"))
    if looks_local and not re.search(r"[=<>~!]=|[<>]", spec):  # a path that is not there is never sent to pip
        raise DistillError(f"{spec}: no such folder or file")
    return open_archive(download(spec), spec)


def iter_sources(specs: list[str]) -> Iterator[Source]:
    for spec in specs:
        yield resolve(spec)
