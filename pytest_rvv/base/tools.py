"""Locating external tools and reading their versions."""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path


def find_executable(name: str, *extra_dirs: Path) -> Path | None:
    """``name`` in ``extra_dirs``, beside the running interpreter (venvs), then on PATH."""
    for directory in (*extra_dirs, Path(sys.executable).parent):
        candidate = Path(directory) / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    found = shutil.which(name)
    return Path(found) if found else None


@functools.cache
def version_output(path: Path, flag: str = "--version") -> str:
    """The first non-empty output of ``path --version`` (cached per process)."""
    try:
        proc = subprocess.run([str(path), flag], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return (proc.stdout or proc.stderr).strip()


def parse_version(text: str) -> tuple[int, ...]:
    """The first dotted number in ``text`` as a tuple, ``()`` when there is none."""
    match = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", text)
    return tuple(int(g) for g in match.groups() if g is not None) if match else ()

