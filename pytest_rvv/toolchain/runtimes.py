"""IREE runtimes (``iree-run-module``) per architecture.

- host: the native binary inside the installed iree-base-runtime package;
- aarch64: the binary from the aarch64 iree-base-runtime wheel of exactly the compiler's
  release, downloaded with pip into the cache, run under qemu-aarch64 with Debian's arm64
  cross libraries;
- riscv64: no registry ships one: pytest-rvv builds it from IREE's source into the tools cache, one
  per IREE commit, and each toolchain gets the one its modules load in (toolchain/choice.py);
  ``--rvv-runtime-riscv64`` (``--rvv-compare-runtime-riscv64`` for the reference) overrides.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from pytest_rvv.base.errors import ToolMissing
from pytest_rvv.base.store import Store, file_sha256
from pytest_rvv.base.wheels import fetch_from_wheel
from pytest_rvv.config.settings import Settings
from pytest_rvv.config.targets import AARCH64, HOST, RISCV64
from pytest_rvv.toolchain.choice import YOURS, Probe, RuntimeChoice, choose_riscv64
from pytest_rvv.toolchain.iree_source import NamedSource
from pytest_rvv.toolchain.toolchain import Toolchain

AARCH64_SYSROOT = Path("/usr/aarch64-linux-gnu")
AARCH64_WHEEL_PLATFORM = "manylinux_2_28_aarch64"


@dataclass(frozen=True)
class Runtime:
    """An ``iree-run-module`` executable for one architecture, with its sysroot for QEMU ``-L``."""

    arch: str
    executable: Path
    sysroot: Path | None
    origin: str  # where it came from, for reports and doctor
    commit: str | None = None  # the IREE commit it was built from, when known
    choice: RuntimeChoice | None = None  # riscv64: how it was chosen for its toolchain

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


def riscv64_runtime(toolchain: Toolchain, probe: Probe, tools_dir: Path, executable: Path | None = None,
                    sysroot: Path | None = None, source: NamedSource | None = None,
                    option: str = "--rvv-runtime-riscv64", log=lambda line: None) -> Runtime:
    """The riscv64 runtime ``toolchain`` runs with (toolchain/choice.py): the user's, else one built from ``source``
    (IREE's source as the user named it) into ``tools_dir``.

    RuntimeNotProvided (a skip naming the fix) when there is none and no source; NoRuntimeLoads
    (one line) when runtimes exist and none loads the toolchain's modules. The user's paths were checked
    when the settings were read (config/settings.py).
    """
    # no source named: a partial clone of IREE in the tools cache, when the git host can be reached
    choice = choose_riscv64(toolchain, tools_dir, probe, executable, f"user-supplied ({option})", source=source,
                            log=log, network=source is None)
    if choice.how == YOURS:
        return Runtime(RISCV64, choice.executable, sysroot, f"user-supplied {choice.executable}", choice=choice)
    commit = choice.commit[:12] if choice.commit else "unknown commit"
    return Runtime(RISCV64, choice.executable, None, f"built by pytest-rvv from IREE {commit} ({choice.how})",
                   choice.commit, choice)


def runtime_for(arch: str, store: Store, toolchain: Toolchain, settings: Settings, probe: Probe,
                reference: bool = False, log=lambda line: None) -> Runtime:
    """The runtime for ``arch`` and ``toolchain``: the user's when given, else the one pytest-rvv finds or fetches.

    ``reference``: the toolchain is the --rvv-compare side (its own runtime options apply). A riscv64 runtime is
    built from the settings' IREE source (PYTEST_RVV_IREE_SRC) into their tools folder.
    """
    if arch == HOST:
        return host_runtime(toolchain.host_run_module)
    if arch == AARCH64:
        return aarch64_runtime(store, toolchain.release, None if reference else settings.runtime_aarch64)
    source = NamedSource.given(variable=settings.iree_source)
    if reference:
        return riscv64_runtime(toolchain, probe, settings.tools_dir, settings.compare_runtime_riscv64, None, source,
                               option="--rvv-compare-runtime-riscv64", log=log)
    return riscv64_runtime(toolchain, probe, settings.tools_dir, settings.runtime_riscv64, settings.sysroot_riscv64,
                           source, log=log)
