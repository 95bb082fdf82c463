"""ONNX Runtime's own riscv64 build, the first peer IREE is compared with: Debian 13's ``libonnxruntime1.21``
(built for rv64gc) and its headers, in a private sysroot of the tools cache (toolchain/debian_sysroot.py):
``<tools>/onnxruntime-riscv64-1.21.0/``.
"""

from __future__ import annotations

import sys
from pathlib import Path

from pytest_rvv.toolchain import debian_sysroot
from pytest_rvv.toolchain.debian_sysroot import (
    MARKER,
    MIRROR_ENV,
    SUITE,
    PeerSysroot,
    SysrootRecipe,
    SysrootUnavailable,
)

__all__ = [
    "MARKER",
    "MIRROR_ENV",
    "ORT",
    "SUITE",
    "PeerSysroot",
    "SysrootUnavailable",
    "cached_sysroot",
    "damage",
    "prepare_sysroot",
    "sysroot_dir",
]

ORT_VERSION = "1.21.0"
ORT_PACKAGE = "libonnxruntime1.21"  # Debian names the library package by its soname
LIBRARY = "libonnxruntime.so.1.21"  # the soname the harness loads
ORT = SysrootRecipe("ONNX Runtime", "onnxruntime", ORT_VERSION, ORT_PACKAGE,
                    (ORT_PACKAGE, "libonnxruntime-dev"),  # the C API headers; it depends on the library only
                    f"{debian_sysroot.LIBDIR}/{LIBRARY}", "usr/include/onnxruntime/onnxruntime_c_api.h",
                    "peer-ort-sysroot-v3", files=debian_sysroot.guest_cpu_files())  # v2: its sysfs; v3: GUEST_FILES
damage = debian_sysroot.damage


def sysroot_dir(tools_dir: Path | None = None) -> Path:
    """Where ONNX Runtime's sysroot lives: ``<tools>/onnxruntime-riscv64-1.21.0``."""
    return debian_sysroot.sysroot_dir(ORT, tools_dir)


def cached_sysroot(tools_dir: Path | None = None) -> PeerSysroot | None:
    """ONNX Runtime's sysroot if it is there and verifies, else None (nothing is fetched)."""
    return debian_sysroot.cached_sysroot(ORT, tools_dir)


def prepare_sysroot(tools_dir: Path | None = None, log=print) -> PeerSysroot:
    """ONNX Runtime's verified sysroot, fetched first when absent or damaged (SysrootUnavailable: one line)."""
    return debian_sysroot.prepare_sysroot(ORT, tools_dir, log)


def main(argv: list[str] | None = None) -> int:
    """``python -m pytest_rvv.toolchain.peer_ort``: prepare the sysroot; exit 3 with one line when it cannot."""
    del argv
    try:
        sysroot = prepare_sysroot(log=lambda line: print(f"[peers] {line}", flush=True))
    except SysrootUnavailable as exc:
        print(f"[peers] {exc}", file=sys.stderr)
        return 3
    print(f"[peers] {sysroot.describe()}" + (f", fetched in {sysroot.fetch_s:.1f} s" if sysroot.fetched else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
