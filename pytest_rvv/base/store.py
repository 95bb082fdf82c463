"""A content-addressed on-disk store, safe to share between processes (xdist workers, sessions).

An entry is a directory ``ROOT/NAMESPACE/KK/KEY/`` holding files plus ``manifest.json``, which lists
every file with its size and sha256 and carries free-form metadata. Entries are built in a private
temporary directory and published with one atomic ``rename``, under a per-key file lock, so no
reader ever sees a partial entry. An entry whose files do not match its manifest is corrupt: it is
moved aside and rebuilt. A process hashes each file once: it remembers the hash of a file by path,
inode, size and modification time, unless the file changed less than ``SETTLED_S`` before it was
read (timestamps are coarse: such a file is read again). Processes share that memory per entry: once every file of
an entry has hashed to its manifest and had settled, ``.verified`` beside them keeps each file's inode, size,
modification and change times, and a later lookup whose files all still stat the same trusts them unhashed. Any
write to a file moves its change time (which no tool sets back), so a damaged file is hashed again and refused.

Storage faults (a full disk or quota, a read-only or unwritable directory, a filesystem without atomic
rename or file locks) become one ``StorageFault`` line naming the directory and the fix, never a traceback,
and never a published entry: a build whose tools failed for lack of space is not cached as a failure.
Leftovers of a build killed midway (``kill -9``) are removed by the next build of the same key.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from filelock import FileLock

from pytest_rvv.base.errors import RvvError, StorageFault

MANIFEST = "manifest.json"
VERIFIED = ".verified"  # the stat of every file when it last hashed to the manifest
LOCK_TIMEOUT_S = 3600.0
CACHE_FIX = "give another --rvv-cache-dir (or PYTEST_RVV_CACHE_DIR)"

# what each storage errno means, in words a user acts on
_FAULTS = {
    errno.ENOSPC: "no space left on device", errno.EDQUOT: "disk quota exceeded",
    errno.EROFS: "read-only file system", errno.EACCES: "permission denied", errno.EPERM: "operation not permitted",
    errno.ENOLCK: "no file locks on this filesystem", errno.ENOSYS: "no file locks on this filesystem",
    errno.EOPNOTSUPP: "operation not supported by this filesystem", errno.EXDEV: "no atomic rename here",
}
# the same faults as tools print them (iree-compile, QEMU, the C compiler)
_FAULT_WORDS = ("No space left on device", "Disk quota exceeded", "Read-only file system")


def storage_fault(exc: BaseException, directory: Path, fix: str = CACHE_FIX) -> StorageFault | None:
    """``exc`` as one StorageFault line when it is a storage fault in ``directory`` (else None).

    A full disk, a quota or a read-only filesystem is a storage fault wherever it is raised (also inside a
    tool's error text); permission errors only for paths under ``directory``.
    """
    if isinstance(exc, StorageFault):
        return exc
    what = None
    if isinstance(exc, OSError) and exc.errno in _FAULTS:
        under = exc.filename is None or Path(str(exc.filename)).is_relative_to(directory)
        if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EROFS) or under:
            what = _FAULTS[exc.errno]
    elif isinstance(exc, NotImplementedError) and "lock" in str(exc).lower():  # filelock on a lockless filesystem
        what = "no file locks on this filesystem"
    else:
        what = _said(" ".join(str(part) for part in (exc, getattr(exc, "log", ""), getattr(exc, "details", ""))))
    return None if what is None else _fault(directory, what, fix)


def _said(text: str) -> str | None:
    """The storage fault a tool's output names (``_FAULT_WORDS``), in ``_FAULTS``' words; None when it names none."""
    return next((w[0].lower() + w[1:] for w in _FAULT_WORDS if w in text), None)


def _fault(directory: Path, what: str, fix: str) -> StorageFault:
    advice = "free space there or " if what in (_FAULTS[errno.ENOSPC], _FAULTS[errno.EDQUOT]) else ""
    return StorageFault(f"{directory}: {what}; {advice}{fix}")


def check_writable(directory: Path, fix: str = CACHE_FIX) -> StorageFault | None:
    """Try what the store needs in ``directory`` (create, write, fsync, atomic rename, a file lock); the first
    failure as one StorageFault line, or None when all work."""
    probe = Path(directory) / f".pytest-rvv-probe.{os.getpid()}"
    try:
        Path(directory).mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(probe, b"probe")
        with FileLock(str(probe) + ".lock", timeout=5):
            pass
    except (OSError, NotImplementedError) as exc:
        return storage_fault(exc, Path(directory), fix) or StorageFault(
            f"{directory}: cannot be written ({exc}); {fix}")
    finally:
        for leftover in (probe, Path(str(probe) + ".lock")):
            with contextlib.suppress(OSError):
                leftover.unlink(missing_ok=True)
    return None


def digest(parts: Iterable[str | bytes]) -> str:
    """sha256 over a sequence of parts, each length-prefixed so boundaries are unambiguous."""
    h = hashlib.sha256()
    for part in parts:
        data = part.encode() if isinstance(part, str) else part
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.hexdigest()


def source_digest(module_file: str, *siblings: str) -> str:
    """Digest of the code that makes a stored result: a module's source and its ``siblings`` beside it (cache keys
    include it, so a change to that code computes the result again)."""
    path = Path(module_file)
    return digest([path.read_text(), *(path.with_name(name).read_text() for name in siblings)])


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


SETTLED_S = 2.0
_HASHED: dict[tuple[str, int, int, int], str] = {}


def content_sha(path: Path) -> str:
    """``file_sha256``, computed once per (path, inode, size, mtime) in this process (runtimes, modules, counts
    files, store entries), except for a file that changed less than ``SETTLED_S`` before it was read. The files of an
    entry this process looked up and trusted by its ``.verified`` are not read at all: their manifest gave it."""
    stat = Path(path).stat()
    key = (str(path), stat.st_ino, stat.st_size, stat.st_mtime_ns)
    sha = _HASHED.get(key)
    if sha is None:
        sha = file_sha256(Path(path))
        if time.time_ns() - stat.st_mtime_ns > SETTLED_S * 1e9:
            _HASHED[key] = sha
    return sha


def atomic_write_bytes(path: Path, data: bytes, mode: int = 0o644) -> None:
    """Write ``data`` to ``path`` so that readers see the old or the new content, never a mix (``mode``: 0o755 for a
    program)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)  # mkstemp makes it private; these are shared, readable files
        os.replace(tmp, path)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError) and exc.filename is None:  # a failed write names no file: name the one meant
            exc.filename = str(path)
        raise


@dataclass(frozen=True)
class Entry:
    """A published, verified store entry."""

    path: Path
    key: str
    meta: dict[str, Any]
    created: bool  # True when this call built it, False when it was reused

    def file(self, name: str) -> Path:
        return self.path / name


class Store:
    """Content-addressed entries under ``root``; see the module docstring. ``fix`` ends a storage fault's line."""

    def __init__(self, root: Path, fix: str = CACHE_FIX) -> None:
        self.root = Path(root)
        self.fix = fix

    def entry_dir(self, namespace: str, key: str) -> Path:
        return self.root / namespace / key[:2] / key

    def lookup(self, namespace: str, key: str) -> Entry | None:
        """The entry if it exists and verifies, else None (corrupt entries are not returned)."""
        path = self.entry_dir(namespace, key)
        meta = _verified_meta(path)
        return None if meta is None else Entry(path, key, meta, created=False)

    def get_or_build(
        self,
        namespace: str,
        key: str,
        build: Callable[[Path], dict[str, Any]],
    ) -> Entry:
        """Return the entry for ``key``, building it with ``build(tmpdir) -> meta`` if needed.

        ``build`` writes its files into ``tmpdir`` and returns JSON-able metadata, which the entry then holds as
        the manifest keeps it (keys sorted, tuples as lists: the same on the run that builds it as on every later one).
        If it raises, nothing is published and the exception propagates.
        """
        found = self.lookup(namespace, key)
        if found is not None:
            return found
        try:
            return self._build(namespace, key, build)
        except (OSError, NotImplementedError, RvvError) as exc:
            fault = storage_fault(exc, self.root, self.fix)
            if fault is None:
                raise
            raise fault from None

    def _build(self, namespace: str, key: str, build: Callable[[Path], dict[str, Any]]) -> Entry:
        final = self.entry_dir(namespace, key)
        final.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(str(final) + ".lock", timeout=LOCK_TIMEOUT_S):
            found = self.lookup(namespace, key)
            if found is not None:
                return found
            if final.exists():  # present but failed verification: corrupt
                _discard(final)
            for stale in final.parent.glob(f".{key[:12]}.*.build"):  # a build killed midway (we hold its lock)
                shutil.rmtree(stale, ignore_errors=True)
            tmp = Path(tempfile.mkdtemp(dir=final.parent, prefix=f".{key[:12]}.", suffix=".build"))
            try:
                meta = build(tmp)
                if what := _said(json.dumps(meta, default=str)):  # a tool failed for lack of space: not a result
                    raise _fault(self.root, what, self.fix)
                files = {
                    p.relative_to(tmp).as_posix(): {"size": p.stat().st_size, "sha256": file_sha256(p)}
                    for p in sorted(tmp.rglob("*"))
                    if p.is_file() and p.name != MANIFEST
                }
                text = json.dumps({"key": key, "files": files, "meta": meta}, indent=1, sort_keys=True)
                (tmp / MANIFEST).write_text(text)
                os.rename(tmp, final)
            except BaseException:
                shutil.rmtree(tmp, ignore_errors=True)
                raise
            return Entry(final, key, json.loads(text)["meta"], created=True)  # as a later lookup reads it


def _verified_meta(path: Path) -> dict[str, Any] | None:
    try:
        manifest = json.loads((path / MANIFEST).read_text())
        files = manifest["files"]
        stamps = {name: _stamp(path / name) for name in (MANIFEST, *files)}
        if _stamped(path) == stamps:  # hashed to the manifest before, and not written since
            for name, info in files.items():  # so are their hashes, for content_sha (the stamps had settled)
                _HASHED[(str(path / name), *stamps[name][:3])] = info["sha256"]
            return manifest["meta"]
        for name, info in files.items():
            if stamps[name][1] != info["size"] or content_sha(path / name) != info["sha256"]:
                return None
        _keep_stamps(path, stamps)
        return manifest["meta"]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _stamp(file: Path) -> list[int]:
    stat = file.stat()
    return [stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns]


def _stamped(path: Path) -> dict[str, list[int]] | None:
    try:
        stamps = json.loads((path / VERIFIED).read_text())
        return stamps if isinstance(stamps, dict) else None
    except (OSError, ValueError):
        return None


def _keep_stamps(path: Path, stamps: dict[str, list[int]]) -> None:
    """Write ``.verified`` when every file had settled (a write within the clock's granularity could keep its
    times); best effort: a read-only or full cache still serves what it holds, hashing it each time."""
    if any(time.time_ns() - stamp[3] <= SETTLED_S * 1e9 for stamp in stamps.values()):
        return
    tmp = path / f"{VERIFIED}.{os.getpid()}.tmp"
    try:
        tmp.write_text(json.dumps(stamps))  # no fsync: a lost or torn file only means hashing again
        os.replace(tmp, path / VERIFIED)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)


def _discard(path: Path) -> None:
    """Move a corrupt entry out of the way atomically, then delete it."""
    trash = path.with_name(f".{path.name}.corrupt.{os.getpid()}")
    os.rename(path, trash)
    shutil.rmtree(trash, ignore_errors=True)
