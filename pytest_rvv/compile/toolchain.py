"""The IREE compiler tools: where they are and which version they are."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from pytest_rvv.errors import ToolMissing
from pytest_rvv.tools import find_executable, version_output

INSTALL_HINT = "pip install iree-base-compiler (or run scripts/setup.sh)"


@dataclass(frozen=True)
class Toolchain:
    """iree-import-onnx + iree-compile, with the compiler's full version line (part of cache keys)."""

    iree_compile: Path
    iree_import_onnx: Path
    compiler_version: str  # e.g. "IREE compiler version 3.13.0rc20261016 @ 89ece87b..."

    @property
    def release(self) -> str:
        """The release number, e.g. ``3.13.0``: the version of the matching runtime wheels."""
        try:
            return version("iree-base-compiler")
        except PackageNotFoundError:
            match = re.search(r"compiler version (\d+\.\d+\.\d+)", self.compiler_version)
            return match.group(1) if match else "unknown"


def _packaged_iree_compile() -> Path | None:
    """The real iree-compile binary inside iree-base-compiler.

    Preferred over the console-script wrapper, which turns a compiler crash (a signal) into a
    plain exit code.
    """
    try:
        import iree.compiler as package  # type: ignore[import-not-found]
    except ImportError:
        return None
    binary = Path(package.__file__).parent / "_mlir_libs" / "iree-compile"
    return binary if binary.is_file() else None


@functools.cache
def find_toolchain() -> Toolchain:
    compile_ = _packaged_iree_compile() or find_executable("iree-compile")
    import_ = find_executable("iree-import-onnx")
    if compile_ is None or import_ is None:
        missing = "iree-compile" if compile_ is None else "iree-import-onnx"
        raise ToolMissing(f"{missing} not found; {INSTALL_HINT}")
    text = version_output(compile_)
    line = next((ln.strip() for ln in text.splitlines() if "compiler version" in ln), text.strip())
    if not line:
        raise ToolMissing(f"{compile_} --version printed nothing; reinstall iree-base-compiler")
    return Toolchain(compile_, import_, line)
