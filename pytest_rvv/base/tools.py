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


TCMALLOC = Path("tcmalloc") / "libtcmalloc_minimal.so.4"  # in the tools folder: scripts/setup.sh unpacks it there


def allocator_env(allocator: str, tools_dir: Path) -> dict[str, str] | None:
    """The environment iree-compile runs in: this one with the tools folder's tcmalloc preloaded (after any preload of
    the user's), for ``allocator`` ``tcmalloc`` where setup unpacked it; None (this environment as it is) otherwise.

    The same bytes for less CPU: MLIR and LLVM allocate small objects all the time, and glibc's malloc is the slower
    for it (docs/ci.md: the default suites' compiles 7 % less CPU, a whole mobilenetv2 compile 16 %); the modules and
    phases are unchanged, so no cache key names it. llvm-mca gains nothing from it (measured) and keeps glibc's.
    It is never looked up on the host's library path: scripts/setup.sh says why.
    """
    library = tools_dir / TCMALLOC
    if allocator != "tcmalloc" or not library.is_file():
        return None
    env = dict(os.environ)  # passed through to the child, the user's own LD_PRELOAD first
    env["LD_PRELOAD"] = " ".join(p for p in (env.get("LD_PRELOAD", ""), str(library)) if p)
    # tcmalloc reports each allocation of 1 GiB or more on stderr, which the compiler's errors are read from
    env["TCMALLOC_LARGE_ALLOC_REPORT_THRESHOLD"] = str(1 << 62)
    return env
