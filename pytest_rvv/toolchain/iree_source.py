"""IREE's source, found by commit: what a riscv64 runtime is built from.

``PYTEST_RVV_IREE_SRC`` (or ``--source``; handed in as a ``NamedSource``) may name:

- an IREE git clone: any commit in it is exported (``git archive``) with the submodules a
  runtime build reads, each at the commit that tree pins (from the clone's ``.git/modules`` or
  the submodule's URL);
- a directory holding IREE source trees and/or ``iree-runtime-src-<commit>.tar.xz`` files, found
  recursively, each keyed by the commit in its name (or its clone's HEAD);
- one IREE source tree or tarball (as a single source, whatever commit it is).

With none of these and network access, one partial clone of IREE in the tools cache serves every
commit (fetched on demand). A source's date (its files' modification time, which ``git archive``
sets to the commit's date) orders sources by distance in history when no source has the
compiler's own commit.
"""

from __future__ import annotations

import os
import re
import shutil
import tarfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from pytest_rvv.base.errors import RvvError, ToolMissing
from pytest_rvv.base.process import run_process
from pytest_rvv.base.store import digest, file_sha256
from pytest_rvv.config.settings import GIT_URL_ENV, IREE_GIT_URL, SOURCE_ENV, environment

GIT_TIMEOUT_S = 900.0
RETRY_CLONE_S = 3600.0
WHERE_TO_GET_IT = (
    f"set {SOURCE_ENV} to an IREE git clone, a directory of IREE source trees or iree-runtime-src-<commit>.tar.xz "
    "files, or one tree or .tar.xz (e.g. a git clone of IREE at the commit `iree-compile --version` names)"
)
# What a runtime-only build reads besides IREE's own tree. Older trees need more (v3.9-v3.11:
# benchmark whenever threading is on; v3.11: printf); a submodule a tree does not pin is skipped.
RUNTIME_SUBMODULES = ("third_party/flatcc", "third_party/benchmark", "third_party/printf")
TARBALL_SUFFIXES = (".tar.xz", ".tar.gz", ".tgz", ".tar")
_COMMIT = re.compile(r"(?<![0-9a-f])([0-9a-f]{7,40})(?![0-9a-f])")


class SourceNotFound(ToolMissing):
    """No IREE source could be had for a commit (no variable, no network): one line saying how to get it."""


@dataclass(frozen=True)
class NamedSource:
    """Where the user says IREE's source is, and how they said it (``--source X`` or ``PYTEST_RVV_IREE_SRC=X``).

    A value handed to whoever builds runtimes (a session, the build-runtime command), never looked up by them."""

    location: str
    origin: str

    @classmethod
    def given(cls, option: str | None = None, variable: str | None = None) -> NamedSource | None:
        """``--source`` first, then the variable's value (``Settings.iree_source``); None when neither names one."""
        if option:
            return cls(option, f"--source {option}")
        return cls(variable, f"{SOURCE_ENV}={variable}") if variable else None


@dataclass(frozen=True)
class RuntimeSource:
    """Where one IREE tree is: a directory or a tarball, with its commit and date when they are known."""

    path: Path
    commit: str | None
    origin: str  # e.g. "PYTEST_RVV_IREE_SRC=/x/iree.tar.xz" or "git clone /src/iree at 89ece87b"
    date: float | None = None  # seconds since the epoch: the commit's date as the files carry it

    @property
    def is_tarball(self) -> bool:
        return self.path.is_file()

    def identity(self) -> str:
        """What the build depends on: the commit when known, else the tarball's sha256 or the tree's listing."""
        if self.commit:
            return f"commit:{self.commit}"
        if self.is_tarball:
            return f"sha256:{file_sha256(self.path)}"
        return "tree:" + digest(sorted(f"{p.relative_to(self.path)}:{p.stat().st_size}:{int(p.stat().st_mtime)}"
                                       for p in (self.path / "runtime").rglob("*") if p.is_file()))

    @property
    def day(self) -> str:
        return datetime.fromtimestamp(self.date, UTC).strftime("%Y-%m-%d") if self.date else "date unknown"


def same_commit(a: str | None, b: str | None) -> bool:
    """Two commit ids (full or abbreviated) name the same commit."""
    return bool(a and b) and (a.startswith(b) or b.startswith(a))  # type: ignore[union-attr]


def commit_in_name(path: Path) -> str | None:
    """The hex commit id in a file or folder name (``iree-runtime-src-b48a5955.tar.xz``), None when absent."""
    name = path.name
    for suffix in TARBALL_SUFFIXES:
        name = name.removesuffix(suffix)
    found = _COMMIT.findall(name)
    return found[-1] if found else None


def is_git_clone(path: Path) -> bool:
    return path.is_dir() and (path / ".git").exists()


def _git(*args: str, timeout_s: float = GIT_TIMEOUT_S):
    git = shutil.which("git")
    if git is None:
        raise SourceNotFound(f"git is not installed (apt-get install git); or {WHERE_TO_GET_IT}")
    return run_process([git, *args], timeout_s=timeout_s, env={**os.environ, "GIT_TERMINAL_PROMPT": "0"})


def commit_of(path: Path) -> str | None:
    """The commit of a source: ``git rev-parse HEAD`` in a clone, else a hex id in the file or folder name."""
    if is_git_clone(path) and shutil.which("git"):
        result = _git("-C", str(path), "rev-parse", "HEAD", timeout_s=60)
        if result.ok and result.stdout.strip():
            return result.stdout.strip()
    return commit_in_name(path)


def missing_parts(tree: Path) -> list[str]:
    """What an IREE runtime build needs that ``tree`` lacks (empty when it is an IREE source tree)."""
    needed = ("CMakeLists.txt", "runtime/src/iree", "third_party/flatcc/CMakeLists.txt")
    return [part for part in needed if not (tree / part).exists()]


def tarball_facts(path: Path) -> tuple[str | None, float | None]:
    """(commit recorded by ``git archive`` in the pax header, the first file's mtime) of a tarball.

    ``git archive`` dates every member with the commit; a directory entry may carry the packing time instead.
    """
    try:
        with tarfile.open(path) as archive:
            recorded = archive.pax_headers.get("comment")
            first = next((m for m in archive if m.isfile()), None)
            return (recorded.strip() if recorded and _COMMIT.fullmatch(recorded.strip()) else None,
                    float(first.mtime) if first is not None else None)
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise RvvError(f"{path}: cannot read this tarball ({exc}); {WHERE_TO_GET_IT}") from None


def tree_date(tree: Path) -> float | None:
    """The date of a tree: its top-level CMakeLists.txt's mtime (a git checkout's or unpacked archive's)."""
    cmake = tree / "CMakeLists.txt"
    return cmake.stat().st_mtime if cmake.is_file() else None


def source_from_path(raw: str | Path, origin: str) -> RuntimeSource:
    """One IREE source tree or tarball (one clear line when ``raw`` is neither)."""
    path = Path(raw).expanduser()
    if not path.exists():
        raise SourceNotFound(f"{origin}: {path} does not exist; {WHERE_TO_GET_IT}")
    if path.is_dir():
        missing = missing_parts(path)
        if missing:
            raise RvvError(f"{origin}: {path} is not an IREE source tree (missing {', '.join(missing)}); "
                           f"{WHERE_TO_GET_IT}")
        return RuntimeSource(path, commit_of(path), origin, tree_date(path))
    if not tarfile.is_tarfile(path):
        raise RvvError(f"{origin}: {path} is neither a directory nor a tar archive; {WHERE_TO_GET_IT}")
    named = commit_in_name(path)
    recorded, date = tarball_facts(path)
    if named and recorded and not same_commit(named, recorded):
        raise RvvError(f"{origin}: {path} holds IREE {recorded[:12]} (recorded by git archive), not {named} as its "
                       f"name says; rename it or fetch the tree of {named}")
    return RuntimeSource(path, recorded or named, origin, date)


@dataclass
class SourceIndex:
    """Every IREE source one location offers, by commit: a clone, a folder of trees/tarballs, or one of them."""

    location: Path | None
    origin: str
    sources: list[RuntimeSource] = field(default_factory=list)  # trees and tarballs found
    clone: Path | None = None  # a git clone: any commit in it
    single: bool = False  # one tree or tarball named directly: it serves whatever commit is asked

    def describe(self) -> str:
        if self.clone is not None:
            return f"git clone {self.clone}"
        if self.single:
            return f"{self.origin}"
        commits = ", ".join(s.commit[:8] for s in self.sources if s.commit) or "none with a commit in its name"
        return f"{self.origin} ({len(self.sources)} source(s): {commits})"

    def for_commit(self, commit: str, workdir: Path) -> RuntimeSource | None:
        """The source of ``commit``: a found tree/tarball, or one exported from the clone into ``workdir``."""
        for source in self.sources:
            if same_commit(source.commit, commit):
                return source
        if self.clone is not None:
            return export_commit(self.clone, commit, workdir)
        return None

    def others(self) -> list[RuntimeSource]:
        """Every found source (a clone's other commits are not enumerated: it has the one asked for or none)."""
        return list(self.sources)


def find_sources(location: str | None, origin: str | None = None) -> SourceIndex | None:
    """The sources at ``location`` (named by ``origin``, by default ``--source LOCATION``); None without one."""
    if not location:
        return None
    origin = origin or f"--source {location}"
    path = Path(location).expanduser()
    if not path.exists():
        raise SourceNotFound(f"{origin}: {path} does not exist; {WHERE_TO_GET_IT}")
    if is_git_clone(path):
        return SourceIndex(path, origin, clone=path)
    if path.is_file() or not missing_parts(path):
        return SourceIndex(path, origin, [source_from_path(path, origin)], single=True)
    found = list(_scan(path, origin))
    if not found:
        raise SourceNotFound(f"{origin}: {path} holds no IREE source tree, git clone or "
                             f"iree-runtime-src-<commit>.tar.xz (searched recursively); {WHERE_TO_GET_IT}")
    return SourceIndex(path, origin, found)


def _scan(folder: Path, origin: str) -> Iterator[RuntimeSource]:
    """Trees (a checked-out clone is one, at its HEAD) and named tarballs under ``folder``.

    Neither a tree nor a clone is searched inside; a clone without a checkout is left out (name it directly).
    """
    for entry in sorted(folder.iterdir()):
        if entry.name.startswith("."):
            continue
        if entry.is_dir() and not missing_parts(entry):
            yield RuntimeSource(entry, commit_of(entry), f"{origin} ({entry.name})", tree_date(entry))
        elif entry.is_dir() and not is_git_clone(entry):
            yield from _scan(entry, origin)
        elif entry.name.endswith(TARBALL_SUFFIXES) and commit_in_name(entry):
            yield source_from_path(entry, f"{origin} ({entry.name})")


def export_commit(clone: Path, commit: str, workdir: Path) -> RuntimeSource:
    """IREE at ``commit`` from ``clone`` (``git archive``), with the runtime's submodules at their pinned commits."""
    resolved = _git("-C", str(clone), "rev-parse", "--verify", "--quiet", f"{commit}^{{commit}}", timeout_s=60)
    if not resolved.ok:
        fetched = _git("-C", str(clone), "fetch", "--quiet", "--filter=blob:none", "origin", commit)
        resolved = _git("-C", str(clone), "rev-parse", "--verify", "--quiet", f"{commit}^{{commit}}", timeout_s=60)
        if not fetched.ok or not resolved.ok:
            raise SourceNotFound(f"the git clone {clone} lacks IREE commit {commit[:12]} (and cannot fetch it); "
                                 f"`git -C {clone} fetch origin {commit}` with network, or {WHERE_TO_GET_IT}")
    full = resolved.stdout.strip()
    tree = workdir / f"iree-{full[:12]}"
    if not (tree / "CMakeLists.txt").is_file():
        shutil.rmtree(tree, ignore_errors=True)
        tree.mkdir(parents=True)
        _archive_into(clone, full, tree, f"IREE {full[:12]}")
        for sub in RUNTIME_SUBMODULES:
            _fill_submodule(clone, full, sub, tree)
    date = _git("-C", str(clone), "show", "-s", "--format=%ct", full, timeout_s=60)
    when = float(date.stdout.strip()) if date.ok and date.stdout.strip().isdigit() else None
    return RuntimeSource(tree, full, f"git clone {clone} at {full[:12]}", when)


def _archive_into(repo: Path, commit: str, into: Path, what: str) -> None:
    archive = into.parent / f".{into.name}.tar"
    result = _git("-C", str(repo), "archive", "--format=tar", "-o", str(archive), commit)
    if not result.ok:
        raise SourceNotFound(f"`git archive` of {what} in {repo} failed ({result.status()}); {WHERE_TO_GET_IT}")
    with tarfile.open(archive) as tar:
        extract_tar(tar, into)
    archive.unlink()


def extract_tar(tar: tarfile.TarFile, into: Path) -> None:
    """Unpack ``tar`` into ``into``, refusing members that would land outside it.

    Python 3.11.4+ does this with ``filter="data"``; Debian 12's python3 is 3.11.2, which has no
    ``filter`` argument, so there the same rule (no absolute or ``..`` paths, no links out, no devices)
    is checked here first.
    """
    if hasattr(tarfile, "data_filter"):
        tar.extractall(into, filter="data")
        return
    root = Path(into).resolve()
    members = []
    for member in tar.getmembers():
        target = (root / member.name).resolve()
        if not target.is_relative_to(root) or member.isdev():
            raise tarfile.TarError(f"member {member.name!r} would land outside {root} or is a device")
        if member.islnk() or member.issym():
            base = root if member.islnk() else target.parent
            if not (base / member.linkname).resolve().is_relative_to(root):
                raise tarfile.TarError(f"link {member.name!r} -> {member.linkname!r} points outside {root}")
        member.mode &= 0o755 if member.isdir() else 0o644 | (member.mode & 0o111)
        members.append(member)
    tar.extractall(into, members=members)


def _fill_submodule(clone: Path, commit: str, sub: str, tree: Path) -> None:
    """Put submodule ``sub`` at the commit ``commit`` pins into ``tree`` (nothing when it pins none)."""
    listed = _git("-C", str(clone), "ls-tree", commit, sub, timeout_s=60)
    parts = listed.stdout.split()
    if not listed.ok or len(parts) < 3 or parts[1] != "commit":
        return
    pinned = parts[2]
    modules = clone / ".git" / "modules" / sub
    repo = modules if modules.is_dir() else clone / sub
    if not (repo / "HEAD").exists() and not (repo / ".git").exists():
        repo = _fetched_submodule(clone, commit, sub, pinned)
    target = tree / sub
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    _archive_into(repo, pinned, target, f"{sub} {pinned[:12]}")


def _fetched_submodule(clone: Path, commit: str, sub: str, pinned: str) -> Path:
    """A partial clone of submodule ``sub`` (its URL from ``.gitmodules`` at ``commit``) holding ``pinned``."""
    urls = _git("-C", str(clone), "config", "--blob", f"{commit}:.gitmodules", "--get-regexp", r"submodule\..*\.url",
                timeout_s=60)
    paths = _git("-C", str(clone), "config", "--blob", f"{commit}:.gitmodules", "--get-regexp",
                 r"submodule\..*\.path", timeout_s=60)
    name = next((ln.split()[0].removesuffix(".path") for ln in paths.stdout.splitlines()
                 if ln.split()[1:] == [sub]), None)
    url = next((ln.split()[1] for ln in urls.stdout.splitlines() if name and ln.split()[0] == f"{name}.url"), None)
    missing = (f"the git clone {clone} has no copy of submodule {sub} (needed at {pinned[:12]} by IREE {commit[:12]}): "
               f"`git -C {clone} submodule update --init {sub}`")
    if url is None:
        raise SourceNotFound(missing)
    repo = clone / ".git" / "pytest-rvv-modules" / sub
    if not (repo / "HEAD").exists():
        repo.parent.mkdir(parents=True, exist_ok=True)
        made = _git("clone", "--bare", "--filter=blob:none", "--no-checkout", url, str(repo))
        if not made.ok:
            raise SourceNotFound(f"{missing} (cloning {url} failed: {made.status()})")
    if not _git("-C", str(repo), "cat-file", "-e", f"{pinned}^{{commit}}", timeout_s=60).ok:
        _git("-C", str(repo), "fetch", "--quiet", "--filter=blob:none", "origin", pinned)
    return repo


def partial_clone(into: Path) -> Path:
    """One partial clone of IREE (no blobs until needed) in the tools cache, made once; SourceNotFound offline."""
    if is_git_clone(into):
        return into
    url = environment(GIT_URL_ENV) or IREE_GIT_URL
    unreachable = into.parent / f"{into.name}.unreachable"  # a failed clone is not retried for an hour
    if unreachable.is_file() and time.time() - unreachable.stat().st_mtime < RETRY_CLONE_S:
        raise SourceNotFound(f"no IREE source: {unreachable.read_text().strip()} (not retried before an hour has "
                             f"passed; delete {unreachable} to retry now); {WHERE_TO_GET_IT}")
    tmp = into.parent / f".{into.name}.tmp-{os.getpid()}-{int(time.time())}"
    into.parent.mkdir(parents=True, exist_ok=True)
    result = _git("clone", "--filter=blob:none", "--no-checkout", url, str(tmp))
    if not result.ok:
        shutil.rmtree(tmp, ignore_errors=True)
        reason = next((ln for ln in reversed(result.stderr.splitlines()) if ln.strip()), result.status())
        said = f"`clone --filter=blob:none` of {url} failed ({reason.strip()})"
        unreachable.write_text(said + "\n")
        raise SourceNotFound(f"no IREE source: {said}; {WHERE_TO_GET_IT}")
    try:
        os.rename(tmp, into)
    except OSError:  # another process made it first
        shutil.rmtree(tmp, ignore_errors=True)
    return into
