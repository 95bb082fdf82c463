"""RISC-V cores whose LLVM scheduling models estimate silicon cycles (llvm-mca ``-mcpu``), with their VLEN.

VLEN is what ``clang-22 -mcpu=NAME -E -dM`` defines as ``__riscv_v_min_vlen`` (checked in the tests).
A clock turns cycles into milliseconds; it is given only where a shipping part states one.
"""

from __future__ import annotations

from dataclasses import dataclass

from pytest_rvv.base.errors import ConfigError


@dataclass(frozen=True)
class Core:
    """One core model: the llvm-mca CPU name, its VLEN, a short column label and an optional clock."""

    name: str
    vlen: int
    label: str
    ghz: float | None = None


CORES: dict[str, Core] = {c.name: c for c in (
    Core("spacemit-x60", 256, "X60", 1.6),  # SpacemiT K1 (Banana Pi BPI-F3, Milk-V Jupiter): 1.6 GHz
    Core("sifive-x280", 512, "X280"),
    Core("sifive-p670", 128, "P670"),
    Core("andes-ax45mpv", 128, "AX45MPV"),
)}
# How a machine's /proc/cpuinfo names a core llvm-mca models: its uarch line, else its marchid (SpacemiT K1's harts
# read "uarch : spacemit,x60" and "marchid : 0x8000000058000001" on Bianbu's 6.6 kernel; older kernels lack uarch).
MACHINE_CORES = {"spacemit,x60": "spacemit-x60", "0x8000000058000001": "spacemit-x60"}
# A scalar rv64gc target is estimated on each built-in vector core (scalar code runs the same at any VLEN),
# so vector-over-scalar speedup on one core is a real column.
DEFAULT_SCALAR_CORES = ("spacemit-x60", "sifive-x280", "sifive-p670")


def core(spec: str, where: str) -> Core:
    """``spacemit-x60`` or ``spacemit-x60@1.6`` (a clock in GHz); one ConfigError line when unknown."""
    name, _, clock = spec.partition("@")
    known = CORES.get(name.strip())
    if known is None:
        raise ConfigError(f"{where}: silicon core {name!r} is unknown; known: {', '.join(CORES)}")
    if not clock:
        return known
    try:
        ghz = float(clock)
    except ValueError:
        ghz = 0.0
    if ghz <= 0:
        raise ConfigError(f"{where}: silicon {spec!r}: give the clock in GHz after @, e.g. {name}@1.6")
    return Core(known.name, known.vlen, known.label, ghz)


def default_cores(vector: bool, vlen: int | None) -> tuple[str, ...]:
    """The cores a riscv64 target is estimated on by default: its VLEN's built-in core, or all for scalar code."""
    if not vector:
        return DEFAULT_SCALAR_CORES
    return tuple(c for c in DEFAULT_SCALAR_CORES if CORES[c].vlen == vlen)


def machine_core(uarch: str, marchid: str) -> Core | None:
    """The modelled core a machine's /proc/cpuinfo names (uarch, else marchid), or None."""
    name = MACHINE_CORES.get(uarch.strip().lower()) or MACHINE_CORES.get(marchid.strip().lower())
    return CORES.get(name) if name else None
