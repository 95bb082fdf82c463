"""The IREE compiler tools: where they are and which version they are."""

from __future__ import annotations

import functools
import importlib.util
import os
import re
import subprocess
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from pytest_rvv.base.errors import ToolMissing
from pytest_rvv.base.tools import find_executable, version_output

INSTALL_HINT = "pip install iree-base-compiler (or run scripts/setup.sh)"


def compiler_commit(version_line: str) -> str | None:
    """The commit in ``IREE compiler version 3.13.0rc20261016 @ 89ece87b...``, None when absent."""
    match = re.search(r"@\s*([0-9a-f]{7,40})", version_line)
    return match.group(1) if match else None


def compiler_date(version_line: str) -> float | None:
    """The build date in ``3.13.0rc20261016`` (nightly-named releases), seconds since the epoch; None when absent."""
    match = re.search(r"(?:rc|dev|\.)(20\d{6})\b", version_line)
    if not match:
        return None
    try:
        return datetime.strptime(match.group(1), "%Y%m%d").replace(tzinfo=UTC).timestamp()
    except ValueError:
        return None


@dataclass(frozen=True)
class Toolchain:
    """iree-import-onnx + iree-compile, with the compiler's full version line (part of cache keys)."""

    iree_compile: Path
    iree_import_onnx: Path
    compiler_version: str  # e.g. "IREE compiler version 3.13.0rc20261016 @ 89ece87b..."
    build_dir: Path | None = None  # the user's own IREE build (--rvv-iree-build), None for the wheel
    host_run_module: Path | None = None  # its iree-run-module, when it has one
    described: str = ""  # where it comes from, when not the wheel or a build (a reference environment)
    package_release: str | None = None  # the iree-base-compiler release of a reference environment

    @property
    def origin(self) -> str:
        """Where the compiler comes from, for the session header and doctor."""
        if self.described:
            return self.described
        return f"your IREE build {self.build_dir}" if self.build_dir else "the iree-base-compiler wheel"

    @property
    def commit(self) -> str | None:
        """The IREE commit the compiler was built from (``@ <sha>`` in its version line)."""
        return compiler_commit(self.compiler_version)

    @property
    def date(self) -> float | None:
        """The compiler's build date, when its version line carries one (orders runtimes by distance)."""
        return compiler_date(self.compiler_version)

    def lacks(self, flags: tuple[str, ...]) -> tuple[str, ...]:
        """The flags (``--name`` or ``--name=value``) this iree-compile's ``--help`` does not list (no flags: none, and
        iree-compile is not asked: every default-path target's compile comes here)."""
        if not flags:
            return ()
        listed = _compiler_help(self.iree_compile)
        return tuple(f for f in flags if f.split("=")[0] not in listed)

    @property
    def release(self) -> str:
        """The release number, e.g. ``3.13.0``: the version of the matching runtime wheels."""
        if self.package_release:
            return self.package_release
        if self.build_dir is None:
            try:
                return version("iree-base-compiler")
            except PackageNotFoundError:
                pass
        match = re.search(r"compiler version (\d+\.\d+\.\d+)", self.compiler_version)
        return match.group(1) if match else "unknown"


@functools.cache
def _compiler_help(iree_compile: Path) -> frozenset[str]:
    """Every ``--flag`` that ``iree-compile --help-hidden`` lists (once per compiler and process)."""
    result = subprocess.run([str(iree_compile), "--help-hidden"], capture_output=True, text=True, timeout=60)
    return frozenset(re.findall(r"^\s+(--[\w.-]+)", result.stdout, flags=re.MULTILINE))


def _packaged_iree_compile() -> Path | None:
    """The real iree-compile binary inside iree-base-compiler.

    Preferred over the console-script wrapper, which turns a compiler crash (a signal) into a
    plain exit code. Found without importing the package: importing it loads MLIR's native
    extension into this process, which only the compiler process needs.
    """
    try:
        spec = importlib.util.find_spec("iree.compiler")
    except ImportError:
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        binary = Path(folder) / "_mlir_libs" / "iree-compile"
        if binary.is_file():
            return binary
    return None


# Where an IREE build or install directory keeps its tools.
BUILD_TOOL_DIRS = ("tools", "bin", "install/bin", "compiler/bindings/python/iree/compiler/_mlir_libs",
                   # a toolchain environment of pytest-rvv (toolchain/environments.py: --rvv-compare, bisect)
                   "site/iree/compiler/_mlir_libs", "site/iree/_runtime_libs", ".")


def _in_build(build_dir: Path, name: str) -> Path | None:
    for sub in BUILD_TOOL_DIRS:
        candidate = build_dir / sub / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


@functools.cache
def find_toolchain(build_dir: Path | None = None, option: str = "--rvv-iree-build") -> Toolchain:
    """The wheel's tools, or those of ``build_dir`` (an IREE build or install directory) when given.

    A build directory must hold ``iree-compile``; its ``iree-import-onnx`` and ``iree-run-module``
    are used when present (the importer otherwise comes from the environment).
    """
    host_run_module = None
    if build_dir is not None:
        if not build_dir.is_dir():
            raise ToolMissing(f"{option} {build_dir}: no such directory; give an IREE build or install "
                              "directory (the one holding tools/iree-compile or bin/iree-compile)")
        compile_ = _in_build(build_dir, "iree-compile")
        if compile_ is None:
            raise ToolMissing(f"{option} {build_dir}: no iree-compile in "
                              f"{', '.join(f'{d}/' for d in BUILD_TOOL_DIRS[:3])}; build the iree-compile target "
                              "(or install) there first")
        import_ = _in_build(build_dir, "iree-import-onnx") or find_executable("iree-import-onnx")
        host_run_module = _in_build(build_dir, "iree-run-module")
    else:
        compile_ = _packaged_iree_compile() or find_executable("iree-compile")
        import_ = find_executable("iree-import-onnx")
    if compile_ is None or import_ is None:
        missing = "iree-compile" if compile_ is None else "iree-import-onnx"
        raise ToolMissing(f"{missing} not found; {INSTALL_HINT}")
    return Toolchain(compile_, import_, compiler_version_line(compile_), build_dir, host_run_module)


def compiler_version_line(iree_compile: Path) -> str:
    """The ``IREE compiler version ...`` line of ``iree-compile --version`` (part of every cache key)."""
    text = version_output(iree_compile)
    line = next((ln.strip() for ln in text.splitlines() if "compiler version" in ln), text.strip())
    if not line:
        raise ToolMissing(f"{iree_compile} --version printed nothing; reinstall iree-base-compiler")
    return line
