"""Building IREE's runtime (``iree-run-module``) for riscv64 from IREE's source, into the tools cache.

No package registry ships a riscv64 IREE runtime, so pytest-rvv builds one: a statically linked
``iree-run-module`` for plain rv64gc (no V: it runs on every riscv64 target; the dispatch code
brings its own vector instructions), cross-compiled with Debian's ``clang-22`` against Debian's
riscv64 cross libc/libstdc++, after a host build of IREE's own build tools.

Where the source comes from: toolchain/iree_source.py (a clone, a folder of trees and tarballs, one of
them, or a partial clone in the tools cache with network access); which runtime a toolchain runs
with: toolchain/choice.py.

The result is a store entry keyed by the source identity (commit, or the tarball's sha256), the
cross compiler's version and this recipe; a second build of the same key is a lookup.
"""

from __future__ import annotations

import os
import re
import shutil
import tarfile
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from pytest_rvv.base.errors import RvvError, ToolMissing, tail
from pytest_rvv.base.process import run_process
from pytest_rvv.base.store import Entry, Store, digest
from pytest_rvv.base.tools import find_executable, version_output
from pytest_rvv.toolchain.iree_source import (
    WHERE_TO_GET_IT,
    NamedSource,
    RuntimeSource,
    SourceNotFound,
    export_commit,
    extract_tar,
    find_sources,
    missing_parts,
    partial_clone,
    same_commit,
)
from pytest_rvv.toolchain.toolchain import compiler_commit, compiler_date

__all__ = ["NamedSource", "RuntimeSource", "SourceNotFound", "build_runtime", "built_runtimes", "compiler_commit",
           "find_source"]

NAMESPACE = "iree-runtime-riscv64"
RECIPE = "riscv64-static-rv64gc-v1"
CLANG = "clang-22"
CLANGXX = "clang++-22"
CROSS_LIBC = Path("/usr/riscv64-linux-gnu/lib/libc.a")
CROSS_LIBSTDCXX = Path("/usr/lib/gcc-cross/riscv64-linux-gnu")
BUILD_TIMEOUT_S = 3600.0

# Everything the runtime build does not need is off: each of these otherwise downloads from
# GitHub or needs more submodules.
IREE_OPTIONS = (
    "-DCMAKE_BUILD_TYPE=Release",
    "-DIREE_BUILD_COMPILER=OFF",
    "-DIREE_BUILD_TESTS=OFF",
    "-DIREE_BUILD_SAMPLES=OFF",
    "-DIREE_BUILD_BENCHMARKS=OFF",
    "-DIREE_BUILD_PYTHON_BINDINGS=OFF",
    "-DIREE_BUILD_TFLITE_BINDINGS=OFF",
    "-DIREE_ENABLE_LIBBACKTRACE=OFF",
    "-DIREE_ENABLE_CPUINFO=OFF",
    "-DIREE_HAL_DRIVER_DEFAULTS=OFF",
    "-DIREE_HAL_DRIVER_LOCAL_SYNC=ON",
    "-DIREE_HAL_DRIVER_LOCAL_TASK=ON",
    "-DIREE_HAL_EXECUTABLE_LOADER_DEFAULTS=OFF",
    "-DIREE_HAL_EXECUTABLE_LOADER_EMBEDDED_ELF=ON",
    "-DIREE_HAL_EXECUTABLE_PLUGIN_DEFAULTS=OFF",
)
HOST_TOOLS = ("iree-flatcc-cli", "iree-c-embed-data")
RISCV64_FLAGS = "-march=rv64gc -mabi=lp64d"


class BuildFailed(RvvError):
    """The runtime build failed; ``str()`` names the step and the log, ``details`` has its last lines."""

    def __init__(self, message: str, details: str = "") -> None:
        super().__init__(message)
        self.details = details


def commit_mismatch(runtime_commit: str | None, compiler_commit: str | None) -> str:
    """``runtime from IREE <a>, compiler from <b>`` when both are known and differ, else ``""``."""
    if not runtime_commit or not compiler_commit or same_commit(runtime_commit, compiler_commit):
        return ""
    return f"runtime from IREE {runtime_commit[:12]}, compiler from {compiler_commit[:12]}"


@dataclass(frozen=True)
class CrossToolchain:
    """What the build runs: cmake and ninja (>= 3.26, from PyPI), clang-22, Debian's riscv64 cross libraries."""

    cmake: Path
    ninja: Path
    clang: Path
    clangxx: Path

    def identity(self) -> str:
        return version_output(self.clang).splitlines()[0] if version_output(self.clang) else str(self.clang)


def find_cross_toolchain() -> CrossToolchain:
    """Every tool the build needs, or ToolMissing naming the package that provides it."""
    cmake, ninja = find_executable("cmake"), find_executable("ninja")
    pip_hint = "pip install 'cmake>=3.26,<4' ninja (bash scripts/setup.sh python installs them into .venv)"
    if cmake is None or ninja is None:
        raise ToolMissing(f"{'cmake' if cmake is None else 'ninja'} not found: {pip_hint}")
    version = tuple(int(x) for x in re.findall(r"\d+", version_output(cmake))[:2])
    if version < (3, 26):
        raise ToolMissing(f"{cmake} is cmake {'.'.join(map(str, version))}; IREE needs >= 3.26: {pip_hint}")
    clang, clangxx = find_executable(CLANG), find_executable(CLANGXX)
    if clang is None or clangxx is None:
        raise ToolMissing(f"{CLANG} not found: apt-get install clang-22 (Debian bookworm-security; "
                          "bash scripts/setup.sh system)")
    if not CROSS_LIBC.is_file() or not CROSS_LIBSTDCXX.is_dir():
        raise ToolMissing("Debian's riscv64 cross libc/libstdc++ missing: apt-get install gcc-riscv64-linux-gnu "
                          "g++-riscv64-linux-gnu libc6-dev-riscv64-cross (bash scripts/setup.sh system)")
    return CrossToolchain(cmake, ninja, clang, clangxx)


def build_key(source: RuntimeSource, tools: CrossToolchain) -> str:
    """The store key of a build: source identity, cross compiler and recipe."""
    return digest([RECIPE, source.identity(), tools.identity(), *IREE_OPTIONS, RISCV64_FLAGS])


@dataclass(frozen=True)
class BuiltRuntime:
    """A riscv64 ``iree-run-module`` in the tools cache, with where it was built from."""

    executable: Path
    commit: str | None
    origin: str
    built: float  # seconds since the epoch
    date: float | None = None  # the source's commit date, when known (orders builds by distance in history)

    @property
    def commit_text(self) -> str:
        return self.commit[:12] if self.commit else "unknown commit"

    def describe(self) -> str:
        return f"{self.executable} (built from {self.origin}, IREE {self.commit_text})"


def _built(entry: Entry) -> BuiltRuntime:
    meta = entry.meta
    date = meta.get("source_date")
    return BuiltRuntime(entry.file("iree-run-module"), meta.get("commit"), str(meta.get("origin", "?")),
                        float(meta.get("built", 0)), float(date) if date else None)


def built_runtimes(tools_dir: Path) -> Iterator[BuiltRuntime]:
    """Every verified runtime build in the tools cache."""
    store = Store(tools_dir)
    for manifest in sorted((tools_dir / NAMESPACE).glob("*/*/manifest.json")):
        entry = store.lookup(NAMESPACE, manifest.parent.name)
        if entry is not None and entry.file("iree-run-module").is_file():
            yield _built(entry)


def cached_build(tools_dir: Path, commit: str | None) -> BuiltRuntime | None:
    """The newest cached build from ``commit`` (None when there is none, or no commit is known)."""
    builds = [b for b in built_runtimes(tools_dir) if same_commit(b.commit, commit)]
    return max(builds, key=lambda b: b.built) if builds else None


def find_source(compiler_version: str, named: NamedSource | None = None, workdir: Path | None = None) -> RuntimeSource:
    """The source ``build-runtime`` builds for a compiler: the one of its commit, else the nearest by date.

    ``named`` (``--source``, else ``$PYTEST_RVV_IREE_SRC``: ``NamedSource.given``) first; without it, a partial clone
    of IREE in ``workdir`` (network). One tree or tarball named directly is built whatever its commit.
    """
    commit, date = compiler_commit(compiler_version), compiler_date(compiler_version)
    index = find_sources(named.location, named.origin) if named is not None else None
    if index is None:
        if commit is None:
            raise SourceNotFound(f"no IREE source: `iree-compile --version` names no commit ({compiler_version!r}); "
                                 f"{WHERE_TO_GET_IT}")
        if workdir is None:
            raise SourceNotFound(f"no IREE source: {WHERE_TO_GET_IT}")
        return export_commit(partial_clone(workdir / "iree-git"), commit, workdir)
    if index.single:
        return index.sources[0]
    if commit is not None and (own := index.for_commit(commit, workdir or Path(tempfile.gettempdir()))):
        return own
    nearest = sorted(index.others(), key=lambda s: distance(s.date, date))
    if not nearest:
        raise SourceNotFound(f"{index.origin}: no source of IREE {commit[:12] if commit else '(unknown commit)'}; "
                             f"{WHERE_TO_GET_IT}")
    return nearest[0]


def distance(source_date: float | None, compiler: float | None) -> float:
    """How far a source is in history from a compiler, by dates (unknown dates sort last)."""
    if source_date is None or compiler is None:
        return float("inf")
    return abs(source_date - compiler)


def build_runtime(source: RuntimeSource, tools_dir: Path, tools: CrossToolchain | None = None,
                  log=print) -> tuple[BuiltRuntime, bool]:
    """Build (or find) the riscv64 runtime of ``source``; returns it and whether this call built it.

    A failed build raises BuildFailed with the log's last lines and its path; nothing is published.
    """
    tools = tools or find_cross_toolchain()
    key = build_key(source, tools)
    logs = tools_dir / "build-logs"

    def build(tmp: Path) -> dict[str, object]:
        start = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="pytest-rvv-iree-build-") as scratch:
            work = Path(scratch)
            tree = _unpacked(source, work, log)
            exe = _cmake_build(tree, work, tools, logs / f"iree-runtime-{key[:12]}.log", log)
            shutil.copy2(exe, tmp / "iree-run-module")
        return {"commit": source.commit, "origin": source.origin, "built": time.time(), "source_date": source.date,
                "build_s": round(time.monotonic() - start, 1), "cross": tools.identity(), "recipe": RECIPE}

    store = Store(tools_dir)
    entry = store.get_or_build(NAMESPACE, key, build)
    return _built(entry), entry.created


def _unpacked(source: RuntimeSource, work: Path, log) -> Path:
    if not source.is_tarball:
        return source.path
    log(f"unpacking {source.path}")
    try:
        with tarfile.open(source.path) as archive:
            extract_tar(archive, work / "src")
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise RvvError(f"{source.origin}: cannot unpack {source.path} ({exc}); {WHERE_TO_GET_IT}") from None
    tops = [p for p in (work / "src").iterdir()]
    tree = tops[0] if len(tops) == 1 and tops[0].is_dir() else work / "src"
    missing = missing_parts(tree)
    if missing:
        raise RvvError(f"{source.origin}: {source.path} does not hold an IREE source tree in one top-level folder "
                       f"(missing {', '.join(missing)}); {WHERE_TO_GET_IT}")
    return tree


def _cmake_build(tree: Path, work: Path, tools: CrossToolchain, log_path: Path, log) -> Path:
    log_path.parent.mkdir(parents=True, exist_ok=True)
    log_path.write_text("")
    env = dict(os.environ)  # passed through to cmake, ninja first on its PATH
    env["PATH"] = f"{tools.ninja.parent}{os.pathsep}{env.get('PATH', '')}"
    jobs = str(os.cpu_count() or 2)
    host, cross = work / "host", work / "riscv64"
    common = [str(tools.cmake), "-G", "Ninja", f"-DCMAKE_MAKE_PROGRAM={tools.ninja}", "-S", str(tree), *IREE_OPTIONS]
    steps = [
        ("configure the host build tools",
         [*common, "-B", str(host), f"-DCMAKE_C_COMPILER={tools.clang}", f"-DCMAKE_CXX_COMPILER={tools.clangxx}"]),
        ("build the host build tools", [str(tools.cmake), "--build", str(host), "-j", jobs, "--target", *HOST_TOOLS]),
        ("configure the riscv64 cross build",
         [*common, "-B", str(cross), "-DCMAKE_SYSTEM_NAME=Linux", "-DCMAKE_SYSTEM_PROCESSOR=riscv64",
          f"-DCMAKE_C_COMPILER={tools.clang}", f"-DCMAKE_CXX_COMPILER={tools.clangxx}",
          "-DCMAKE_C_COMPILER_TARGET=riscv64-linux-gnu", "-DCMAKE_CXX_COMPILER_TARGET=riscv64-linux-gnu",
          f"-DCMAKE_C_FLAGS={RISCV64_FLAGS}", f"-DCMAKE_CXX_FLAGS={RISCV64_FLAGS}",
          "-DCMAKE_EXE_LINKER_FLAGS=-static", f"-DIREE_HOST_BIN_DIR={host / 'tools'}"]),
        ("build iree-run-module for riscv64",
         [str(tools.cmake), "--build", str(cross), "-j", jobs, "--target", "iree-run-module"]),
    ]
    for index, (what, argv) in enumerate(steps, 1):
        log(f"step {index} of {len(steps)}: {what}")
        result = run_process(argv, timeout_s=BUILD_TIMEOUT_S, env=env)
        with log_path.open("a") as f:
            f.write(f"$ {' '.join(argv)}\n{result.stdout}\n{result.stderr}\n")
        if not result.ok:
            raise BuildFailed(f"IREE runtime build failed to {what} ({result.status()}); full log: {log_path}",
                              tail(result.stdout + "\n" + result.stderr, 15))
    exe = cross / "tools" / "iree-run-module"
    if not exe.is_file():
        raise BuildFailed(f"IREE runtime build produced no {exe}; full log: {log_path}")
    return exe
