"""IREE runtimes (``iree-run-module``) per architecture.

- host: the native binary inside the installed iree-base-runtime package;
- aarch64: the binary from the aarch64 iree-base-runtime wheel of exactly the compiler's
  release, downloaded with pip into the cache, run under qemu-aarch64 with Debian's arm64
  cross libraries;
- riscv64: no registry ships one: ``scripts/setup.sh runtime`` (``pytest-rvv build-runtime``) builds
  it from IREE's source into the tools cache, where it is found; ``--rvv-runtime-riscv64`` overrides.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from pytest_rvv.compile.toolchain import Toolchain
from pytest_rvv.errors import ConfigError, RuntimeNotProvided, ToolMissing
from pytest_rvv.run.qemu import default_tools_dir
from pytest_rvv.run.runtime_build import pick_runtime
from pytest_rvv.settings import Settings
from pytest_rvv.store import Store, file_sha256
from pytest_rvv.targets import AARCH64, HOST, RISCV64
from pytest_rvv.wheels import fetch_from_wheel

AARCH64_SYSROOT = Path("/usr/aarch64-linux-gnu")
AARCH64_WHEEL_PLATFORM = "manylinux_2_28_aarch64"
RISCV64_HINT = (
    "build one with `bash scripts/setup.sh runtime` (from IREE's source: a git clone at the compiler's commit, "
    "or PYTEST_RVV_IREE_SRC=DIR|TARBALL), or pass --rvv-runtime-riscv64=PATH"
)


@dataclass(frozen=True)
class Runtime:
    """An ``iree-run-module`` executable for one architecture, with its sysroot for QEMU ``-L``."""

    arch: str
    executable: Path
    sysroot: Path | None
    origin: str  # where it came from, for reports and doctor
    commit: str | None = None  # the IREE commit it was built from, when known

    @property
    def identity(self) -> str:
        """What the runtime is, without paths: the same on every machine (recorded in baselines)."""
        if self.commit:
            return f"iree-run-module ({self.arch}) from IREE {self.commit[:12]}"
        if self.origin.startswith(("user-supplied", "your IREE build")):
            return f"iree-run-module ({self.arch}) sha256:{file_sha256(self.executable)[:12]}"
        return self.origin


def host_runtime(own_build: Path | None = None) -> Runtime:
    """The wheel's native iree-run-module, or ``own_build`` (the user's IREE build's)."""
    if own_build is not None:
        return Runtime(HOST, own_build, None, f"your IREE build's {own_build}")
    try:
        import iree._runtime_libs as libs  # type: ignore[import-not-found]
    except ImportError as exc:
        raise ToolMissing("iree-base-runtime is not installed; pip install iree-base-runtime") from exc
    exe = Path(libs.__file__).parent / "iree-run-module"
    if not exe.is_file():
        raise ToolMissing(f"{exe} missing; reinstall iree-base-runtime")
    return Runtime(HOST, exe, None, "iree-base-runtime (host)")


def aarch64_runtime(store: Store, release: str, executable: Path | None = None) -> Runtime:
    """The aarch64 iree-run-module of iree-base-runtime==``release``, fetched once into the cache.

    ``executable`` overrides it with the user's own aarch64 build.
    """
    if not (AARCH64_SYSROOT / "lib" / "ld-linux-aarch64.so.1").exists():
        raise ToolMissing(
            f"{AARCH64_SYSROOT} has no arm64 libc; apt-get install libc6-arm64-cross libstdc++6-arm64-cross "
            "(or run scripts/setup.sh system)"
        )
    if executable is not None:
        return Runtime(AARCH64, executable, AARCH64_SYSROOT, f"user-supplied {executable}")
    requirement = f"iree-base-runtime=={release}"
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    entry = fetch_from_wheel(
        store, requirement, {"iree-run-module": "iree/_runtime_libs/iree-run-module"},
        platform=AARCH64_WHEEL_PLATFORM, python_version=python, executable=("iree-run-module",),
    )
    return Runtime(AARCH64, entry.file("iree-run-module"), AARCH64_SYSROOT,
                   f"{requirement} ({AARCH64_WHEEL_PLATFORM} wheel)")


def riscv64_runtime(executable: Path | None, sysroot: Path | None, compiler_version: str = "",
                    tools_dir: Path | None = None) -> Runtime:
    """The user's riscv64 iree-run-module, else the one setup built into the tools cache.

    RuntimeNotProvided (a skip reason naming the fix) when there is neither.
    """
    if executable is None:
        built = pick_runtime(tools_dir or default_tools_dir(), compiler_version)
        if built is None:
            raise RuntimeNotProvided(f"no riscv64 IREE runtime: {RISCV64_HINT}")
        return Runtime(RISCV64, built.executable, None, f"built by pytest-rvv from IREE {built.commit_text} "
                       f"({built.origin})", built.commit)
    if not executable.is_file():
        raise ConfigError(f"--rvv-runtime-riscv64 {executable}: no such file; {RISCV64_HINT}")
    if sysroot is not None and not sysroot.is_dir():
        raise ConfigError(f"--rvv-sysroot-riscv64 {sysroot}: no such directory")
    return Runtime(RISCV64, executable, sysroot, f"user-supplied {executable}")


def runtime_for(arch: str, store: Store, toolchain: Toolchain, settings: Settings) -> Runtime:
    """The runtime for ``arch``: the user's when given, else the one pytest-rvv finds or fetches."""
    if arch == HOST:
        return host_runtime(toolchain.host_run_module)
    if arch == AARCH64:
        return aarch64_runtime(store, toolchain.release, settings.runtime_aarch64)
    return riscv64_runtime(settings.runtime_riscv64, settings.sysroot_riscv64, toolchain.compiler_version)
