"""QEMU user-mode emulators: discovery, version and plugin-support checks."""

from __future__ import annotations

import functools
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from pytest_rvv.base.errors import ToolMissing
from pytest_rvv.base.tools import find_executable, parse_version, version_output
from pytest_rvv.config.settings import default_tools_dir

MIN_VERSION = (9, 0)
SETUP_HINT = "run 'bash scripts/setup.sh qemu' (builds QEMU 10.0.2 with plugins) or pass --rvv-qemu-dir"
LOADER = Path("/lib64/ld-linux-x86-64.so.2")  # glibc's x86-64 loader: ``--help`` lists the ISA levels this CPU runs
_MARCH = re.compile(r"-march=(x86-64-v\d)\b")


@functools.cache
def host_x86_levels() -> frozenset[str]:
    """The x86-64 ISA levels this machine runs (``x86-64-v3`` ...), as glibc's loader reports them (what
    scripts/setup.sh asks); empty off x86-64."""
    if not LOADER.is_file():
        return frozenset()
    text = subprocess.run([str(LOADER), "--help"], capture_output=True, text=True, timeout=60).stdout
    return frozenset(re.findall(r"(x86-64-v\d) \(supported", text))


def build_cflags(path: Path) -> str | None:
    """The extra C flags scripts/setup.sh built ``path`` (``<prefix>/bin/qemu-*``) with, "" for a portable build,
    None when setup did not build it (no ``<prefix>/build-cflags``)."""
    recorded = path.parent.parent / "build-cflags"
    if not recorded.is_file():
        return None
    return recorded.read_text().strip().removeprefix("cflags=")


def check_host_runs(path: Path) -> None:
    """Refuse, in one line, a QEMU built for an ISA level this CPU lacks (a cache copied from an AVX2 machine): it
    would die on an illegal instruction mid-run."""
    march = _MARCH.search(build_cflags(path) or "")
    if march and march.group(1) not in host_x86_levels():
        raise ToolMissing(f"{path} was built for {march.group(1)} ({path.parent.parent / 'build-cflags'}), which this "
                          "CPU does not run (a cache from another machine?): rerun 'bash scripts/setup.sh qemu', it "
                          "builds QEMU again for this CPU")


@dataclass(frozen=True)
class Qemu:
    """One ``qemu-<arch>`` binary with its version."""

    arch: str
    path: Path
    version: tuple[int, ...]

    @property
    def version_text(self) -> str:
        return ".".join(map(str, self.version))

    @functools.cached_property
    def supports_plugins(self) -> bool:
        """Static Debian builds reject ``-plugin``; plugin-capable ones fail to load a missing file."""
        proc = subprocess.run([str(self.path), "-plugin", "/nonexistent/pytest-rvv-probe.so", "/bin/true"],
                              capture_output=True, text=True, timeout=60)
        return "Could not load plugin" in proc.stderr or "could not load" in proc.stderr.lower()

    @property
    def build_cflags(self) -> str | None:
        """The extra C flags scripts/setup.sh built it with (``-march=x86-64-v3`` where the host runs that: QEMU's
        float helpers then avoid an SSE/AVX transition per call), "" for a portable build, None when setup did not
        build it."""
        return build_cflags(self.path)

    @functools.cached_property
    def cpu_models(self) -> frozenset[str]:
        """The CPU models ``-cpu help`` lists (e.g. ``rv64``, ``rva23u64``, ``max``)."""
        proc = subprocess.run([str(self.path), "-cpu", "help"], capture_output=True, text=True, timeout=60)
        lines = proc.stdout.splitlines()[1:]  # "Available CPUs:" then one model per line
        return frozenset(line.split()[0] for line in lines if line.strip())

    def check_cpu(self, cpu: str, target: str) -> None:
        """Refuse a ``-cpu`` model (a profile such as ``rva23u64``) this QEMU does not have, in one line."""
        model = cpu.split(",")[0]
        if model and self.cpu_models and model not in self.cpu_models:
            raise ToolMissing(f"target {target!r}: {self.path} {self.version_text} has no CPU model {model!r} "
                              f"(it has {', '.join(sorted(self.cpu_models))}); use a QEMU that has it, or another "
                              "emulator-cpu")


def qemu_search_dirs(explicit: Path | None) -> list[Path]:
    if explicit is not None:
        return [explicit]
    tools = default_tools_dir()
    builds = sorted(tools.glob("qemu-*/bin"), key=lambda p: parse_version(p.parent.name), reverse=True)
    return builds


@functools.cache
def find_qemu(arch: str, explicit_dir: Path | None = None) -> Qemu:
    """The newest usable ``qemu-<arch>``: ``explicit_dir``, the setup script's build, then PATH."""
    name = f"qemu-{arch}"
    if explicit_dir is not None:
        candidate = explicit_dir / name
        if not candidate.is_file():
            raise ToolMissing(f"--rvv-qemu-dir {explicit_dir}: no {name} there")
        path: Path | None = candidate
    else:
        path = find_executable(name, *qemu_search_dirs(None))
    if path is None:
        raise ToolMissing(f"{name} not found; {SETUP_HINT}")
    check_host_runs(path)
    version = parse_version(version_output(path))
    if version < MIN_VERSION:
        shown = ".".join(map(str, version)) or "unknown"
        raise ToolMissing(
            f"{path} is QEMU {shown}; RVV work needs QEMU >= 9 (7.2 lacks riscv_hwprobe and crashes "
            f"on RVV code): {SETUP_HINT}"
        )
    return Qemu(arch, path, version)
