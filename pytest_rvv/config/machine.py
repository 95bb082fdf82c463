"""Machine identity: which machine took a measurement, so machine-bound numbers gate only on it.

A fingerprint is what can change a machine-bound number: the CPU model and the features that
change generated code (the ``host`` target compiles with ``-cpu=host``), the core count and
memory, the kernel and the QEMU build. The readable name is ``--rvv-machine`` /
``PYTEST_RVV_MACHINE`` or, by default, derived from the fingerprint (so another CPU or QEMU gives
another name, like asv's per-machine results).
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
from dataclasses import dataclass, field
from pathlib import Path

from pytest_rvv.base.errors import ConfigError

MACHINE_ENV = "PYTEST_RVV_MACHINE"
# x86 and arm64 features that change what LLVM generates for -cpu=host.
CODEGEN_FEATURES = frozenset({
    "sse4_1", "sse4_2", "avx", "avx2", "fma", "f16c", "bmi1", "bmi2", "avx512f", "avx512bw", "avx512dq",
    "avx512vl", "avx512cd", "avx512_vnni", "avx512_bf16", "avx512_fp16", "avx_vnni", "amx_tile", "amx_bf16",
    "amx_int8", "asimd", "asimddp", "sve", "sve2", "i8mm", "bf16", "fphp", "asimdhp",
})
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


@dataclass(frozen=True)
class Machine:
    """A machine's readable name and its fingerprint (what can change machine-bound numbers)."""

    name: str
    fingerprint: dict[str, str] = field(hash=False)
    named_by: str  # "given" (--rvv-machine, PYTEST_RVV_MACHINE, pyproject) or "fingerprint"

    @property
    def id(self) -> str:
        """A short hash of the fingerprint."""
        return fingerprint_id(self.fingerprint)

    def describe(self) -> str:
        f = self.fingerprint
        return (f"{self.name} ({f.get('cpu', '?')}, {f.get('cores', '?')} cores, {f.get('memory_gib', '?')} GiB, "
                f"kernel {f.get('kernel', '?')}, {f.get('qemu', 'no QEMU')}; fingerprint {self.id})")

    def as_json(self) -> dict[str, object]:
        return {"name": self.name, "id": self.id, "fingerprint": self.fingerprint}


def fingerprint_id(fingerprint: dict[str, str]) -> str:
    return hashlib.sha256(json.dumps(fingerprint, sort_keys=True).encode()).hexdigest()[:8]


def _cpuinfo() -> tuple[str, list[str]]:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor() or platform.machine(), []
    model = next((ln.split(":", 1)[1].strip() for ln in text.splitlines()
                  if ln.split(":")[0].strip() in ("model name", "Model", "uarch", "cpu model")), platform.machine())
    flags_line = next((ln.split(":", 1)[1] for ln in text.splitlines()
                       if ln.split(":")[0].strip() in ("flags", "Features")), "")
    return model, sorted(set(flags_line.split()) & CODEGEN_FEATURES)


def _memory_gib() -> str:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return str(round(int(line.split()[1]) / (1024 * 1024)))
    except (OSError, ValueError, IndexError):
        pass
    return "?"


def fingerprint(qemu: str) -> dict[str, str]:
    """This machine's fingerprint; ``qemu`` names the QEMU build in use (e.g. ``qemu 10.0.2 /path``)."""
    cpu, features = _cpuinfo()
    return {"cpu": cpu, "features": ",".join(features), "cores": str(os.cpu_count() or "?"),
            "memory_gib": _memory_gib(), "kernel": platform.release(), "arch": platform.machine(), "qemu": qemu}


def derived_name(fp: dict[str, str]) -> str:
    """``<cpu model>-<cores>c-<fingerprint id>``, e.g. ``intel-xeon-platinum-8481c-2c-1a2b3c4d``."""
    cpu = re.sub(r"\((?:R|TM|tm|r)\)|\bCPU\b|@.*$|\bProcessor\b", " ", fp.get("cpu", "cpu"))
    slug = re.sub(r"[^a-z0-9]+", "-", cpu.lower()).strip("-")[:40].strip("-") or "cpu"
    return f"{slug}-{fp.get('cores', '?')}c-{fingerprint_id(fp)}"


def check_name(name: str, origin: str) -> str:
    """A machine name is a folder name under baselines/performance/machines/: one clear line when not."""
    if not _NAME.match(name):
        raise ConfigError(f"{origin} {name!r}: a machine name is 1-64 letters, digits, '.', '_' or '-' "
                          "(it names a folder under baselines/performance/machines/)")
    return name


def this_machine(name: str | None, qemu: str) -> Machine:
    """This machine: ``name`` when given (Settings checked it with check_name), else the name derived
    from its fingerprint."""
    fp = fingerprint(qemu)
    if name:
        return Machine(name, fp, "given")
    return Machine(derived_name(fp), fp, "fingerprint")
