"""RISC-V cores whose LLVM scheduling models estimate silicon cycles (llvm-mca ``-mcpu``), with their VLEN.

VLEN is what ``clang-22 -mcpu=NAME -E -dM`` defines as ``__riscv_v_min_vlen`` (checked in the tests).
A clock turns cycles into milliseconds; it is given only where a shipping part states one.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import TypeVar

from pytest_rvv.base.errors import ConfigError


@dataclass(frozen=True)
class Core:
    """One core model: the llvm-mca CPU name, its VLEN, a short column label, an optional clock, the harts of the
    part it ships in (None: no published part fixes it) and the two llvm-mca iteration counts whose difference gives
    a block's steady-state cycles (measure/silicon.py)."""

    name: str
    vlen: int
    label: str
    ghz: float | None = None
    harts: int | None = field(default=None, repr=False)  # not in repr (estimates are keyed by it): no cycle moves
    iterations: tuple[int, int] = (10, 20)
    # (mnemonic, SEW, LMUL, stand-in): where LLVM's model of the core is measured wrong by more than 30 % and an
    # instruction of the same operands and dependencies that the model times as the core measured runs the original
    # (measure/silicon.py gives llvm-mca the stand-in; measure/calibration.py holds each against the measurement);
    # "vmv.v.v@m1": the stand-in read at LMUL 1, the block's own LMUL given back after it; "vmv.v.x@e32mf2": read at
    # SEW 32 and LMUL 1/2, the block's own SEW and LMUL given back
    stand_ins: tuple[tuple[str, str, str, str], ...] = ()

    def stand_in(self, mnemonic: str, sew: str, lmul: str) -> str | None:
        """The instruction llvm-mca reads in place of ``mnemonic`` at that vtype on this core, if any."""
        return self._stood_in.get((mnemonic, sew, lmul))

    @cached_property
    def stood_in_mnemonics(self) -> frozenset[str]:
        """The mnemonics this core has a stand-in for at some vtype (a block with none of them is read as it is)."""
        return frozenset(m for m, _, _, _ in self.stand_ins)

    @cached_property
    def _stood_in(self) -> dict[tuple[str, str, str], str]:
        return {(m, e, lm): s for m, e, lm, s in reversed(self.stand_ins)}  # the first listed wins


# In-order models settle by the second iteration: (cycles at 4 - cycles at 2) / 2 equals (at 20 - at 10) / 10 on every
# executed block of llama-prefill-int8 and squeezenet1.1-int8 on rv64gc, mobilenetv2 and ppocrv4-det on zvl256b(-mmt4d),
# squeezenet1.1-int8 on zvl512b (X60 and X280), and every estimate of the default suites, the kernel step, the layers
# and the peers is unchanged (docs/boards.md); in half the llvm-mca CPU. The out-of-order P670 does not settle so soon
# (llama-prefill-int8 rv64gc: 12,669 of 31,014 blocks differ, -0.23 % in total) and the AX45MPV is not measured.
IN_ORDER_SETTLED = (2, 4)
# The X60's integer multiply-accumulate at m4 and m8: rvv-bench (rvv-bench-results@6438d64 spacemit_x60, tblMaa line
# 447) times vmacc.vv e32 at 4.00 and 8.00 cycles in blocks of two chains at m4 and one serial chain at m8, where LLVM
# 22's model gives it 16 and 32 cycles of latency (8.00 and 32.00 per instruction in those blocks); vfmacc.vv, the same
# three-operand accumulate, it times at 4.00 and 8.00 there, as measured for both (line 627). No cell executes
# vmacc.vv at m4 or m8 at another SEW (surveyed 2026-11-28), and rvv-bench measured e32 only.
_LMULS_UP_TO_M2 = (("8", ("mf8", "mf4", "mf2", "m1", "m2")), ("16", ("mf4", "mf2", "m1", "m2")),
                        ("32", ("mf2", "m1", "m2")), ("64", ("m1", "m2")))  # the LMULs up to 2 that each SEW has
X60_STAND_INS = (("vmacc.vv", "32", "m4", "vfmacc.vv"), ("vmacc.vv", "32", "m8", "vfmacc.vv"),
                 # vmv1r.v copies one register whatever the vtype: rvv-bench 2.00 at every SEW up to m4 (4.00 at m8,
                 # as LLVM's 4), LLVM 22 gives it 4; vmv.v.v at LMUL 1 is timed 2, read under an M1 instrument
                 *(("vmv1r.v", sew, lmul, "vmv.v.v@m1") for sew in ("8", "16", "32", "64")
                   for lmul in ("mf8", "mf4", "mf2", "m1", "m2", "m4")),
                 # the scalar-to-vector moves: rvv-bench 1.00 up to m2 and 2.00 at m4 (4.00 at m8, as LLVM's) at every
                 # SEW (tblMaa lines 695, 714), LLVM 22 gives 4 at every vtype; the splat of the same operands is timed
                 # 1 at LMUL 1/2 and 2 at LMUL 1. SEW 64 has no LMUL 1/2: there the splat is read at e32,mf2 (it writes
                 # one register either way; llvm-mca times it as at e32 in every context measured, docs/kernels.md)
                 *(("vmv.s.x", sew, lmul, "vmv.v.x@mf2") for sew, lmuls in _LMULS_UP_TO_M2 if sew != "64"
                   for lmul in lmuls),
                 *(("vmv.s.x", "64", lmul, "vmv.v.x@e32mf2") for lmul in ("m1", "m2")),
                 *(("vfmv.s.f", sew, lmul, "vfmv.v.f@mf2") for sew, lmuls in _LMULS_UP_TO_M2
                   if sew in ("16", "32") for lmul in lmuls),
                 *(("vmv.s.x", sew, "m4", "vmv.v.x@m1") for sew in ("8", "16", "32", "64")),
                 *(("vfmv.s.f", sew, "m4", "vfmv.v.f@m1") for sew in ("16", "32", "64")),
                 # vslideup.vi at m1: rvv-bench 2.00 at every SEW (line 245), LLVM 22 3; vrgather.vi, the same operands
                 # (vd, vs2, uimm; neither may overlap vd with vs2), is timed 2 (from m2 up LLVM's extra cycle is 25 %)
                 *(("vslideup.vi", sew, "m1", "vrgather.vi") for sew in ("8", "16", "32", "64")),
                 # two-field segment stores at e32 (line 829): rvv-bench 3.24 at mf2 and 24.00 at m4, LLVM 22 8 and
                 # 64; the unit-stride store of the same bytes (LMUL x 2) is timed 3 and 19 (-7 %, -21 %). At m1 and
                 # m2 it is timed 4 and 8 against 6.07 and 12.00 (-34 %, -33 %): no stand-in, an expected failure each
                 ("vsseg2e32.v", "32", "mf2", "vse32.v@m1"), ("vsseg2e32.v", "32", "m4", "vse32.v@m8"))


def cycles_ms(cycles: float, ghz: float) -> float:
    """Milliseconds that ``cycles`` take at ``ghz`` (the one conversion of cycles to time)."""
    return cycles / (ghz * 1e6)


def cycles_s(cycles: float, ghz: float) -> float:
    """Seconds that ``cycles`` take at ``ghz``."""
    return cycles / (ghz * 1e9)


CORES: dict[str, Core] = {c.name: c for c in (
    # SpacemiT K1 (Banana Pi BPI-F3, Milk-V Jupiter): 1.6 GHz, 8 X60 cores in two clusters of 4 (Banana Pi's K1
    # datasheet)
    Core("spacemit-x60", 256, "X60", 1.6, harts=8, iterations=IN_ORDER_SETTLED, stand_ins=X60_STAND_INS),
    Core("sifive-x280", 512, "X280", iterations=IN_ORDER_SETTLED),
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
    return replace(known, ghz=ghz)


def default_cores(vector: bool, vlen: int | None) -> tuple[str, ...]:
    """The cores a riscv64 target is estimated on by default: its VLEN's built-in core, or all for scalar code."""
    if not vector:
        return DEFAULT_SCALAR_CORES
    return tuple(c for c in DEFAULT_SCALAR_CORES if CORES[c].vlen == vlen)


def machine_core(uarch: str, marchid: str) -> Core | None:
    """The modelled core a machine's /proc/cpuinfo names (uarch, else marchid), or None."""
    name = MACHINE_CORES.get(uarch.strip().lower()) or MACHINE_CORES.get(marchid.strip().lower())
    return CORES.get(name) if name else None


@dataclass(frozen=True)
class CacheLevel:
    """One cache level as the memory-traffic model simulates it: size, associativity and line, in bytes."""

    size: int
    ways: int
    line: int = 64

    @property
    def sets(self) -> int:
        return self.size // (self.ways * self.line)


@dataclass(frozen=True)
class CacheHierarchy:
    """A core's private L1 data cache and the L2 behind it, with where the figures were published."""

    l1d: CacheLevel
    l2: CacheLevel
    source: str

    @property
    def geometry(self) -> tuple[int, int, int, int, int]:
        """What the rvv_memtrace plugin takes: L1 sets, L1 ways, L2 sets, L2 ways, line bytes."""
        return (self.l1d.sets, self.l1d.ways, self.l2.sets, self.l2.ways, self.l1d.line)


# Cache hierarchies of the modelled cores, from published descriptions only (a core without one is left out, and
# asking for its traffic is one ConfigError line):
# - spacemit-x60 (SpacemiT K1): 32 KiB L1D per core, 512 KiB L2 shared by a cluster of 4 (Banana Pi's K1 datasheet);
#   64-byte lines (the K1 device tree's riscv,cbom-block-size = 64 and its zic64b); L1D 4-way x 128 sets and L2
#   16-way x 512 sets: Yixun Lan (SpacemiT K1 maintainer) reviewing the initial K1 device tree on linux-riscv, 2024
#   ("L1 cache is 4way, 128sets, 32KB ... L2 cache is 16way, 512sets, 512KB"). One thread runs alone in its
#   cluster here (local-sync), so it has the whole L2.
# - sifive-x280: 32 KiB L1D per core and a private L2 (WikiChip on SiFive's X280, 2022), but no L2 size or
#   associativity found published: not modelled.
# - sifive-p670, andes-ax45mpv: no published cache sizes found: not modelled.
_T = TypeVar("_T")
CACHES: dict[str, CacheHierarchy] = {
    "spacemit-x60": CacheHierarchy(CacheLevel(32 * 1024, 4), CacheLevel(512 * 1024, 16),
                                   "K1 datasheet (sizes); K1 device-tree review by its maintainer (ways, sets)"),
}


def _published(table: dict[str, _T], name: str, what: str) -> _T:
    """Core ``name``'s entry in ``table``; one ConfigError line naming the modelled cores for a core without one."""
    found = table.get(name)
    if found is None:
        raise ConfigError(f"core {name!r} has no published {what}; modelled: {', '.join(table)}")
    return found


def cache_hierarchy(name: str) -> CacheHierarchy:
    """The published cache hierarchy of core ``name``; one ConfigError line for a core without one."""
    return _published(CACHES, name, "cache parameters to model its memory traffic")


@dataclass(frozen=True)
class MemoryTimings:
    """What a part's memory system costs the wall-time estimate (measure/walltime.py): the latency of an L1 miss
    that hits L2 (cycles) and of one that goes to DRAM (ns), how many misses one core keeps outstanding at once
    (memory-level parallelism), the sustained DRAM bandwidth that all cores share, the L2's line-fill bandwidth per
    cluster, and the cores per cluster (one L2 each). ``source`` names where each figure comes from."""

    l2_latency: float  # cycles, L1 miss that hits L2
    dram_latency_ns: float  # ns, L1 miss that misses L2 too
    mlp: float  # misses one core has outstanding at once
    dram_gbs: float  # GB/s (1e9 bytes/s), sustained, one channel shared by every core
    l2_bytes_per_cycle: float  # per cluster, L2 -> L1 line fills
    cluster: int  # cores sharing one L2
    source: str


# Memory timings of the modelled parts; each figure published, or an assumption stated as one (chosen before the
# estimate was held against any calibration row; not fitted to them):
# - spacemit-x60 (SpacemiT K1):
#   dram_gbs 7.0: one 32-bit LPDDR4X channel at 2666 MT/s = 10.66 GB/s peak (Banana Pi's K1 datasheet), "about 7 GB/s
#     sustained" (the published roofline of the Milk-V Jupiter, book.j4orz.ai/assets/rooflinejupiter.html: "Realistic
#     (~7 GB/s)"; an estimate, not a STREAM run); shared by all 8 cores.
#   cluster 4: two clusters of 4 cores, one 512 KiB L2 each (K1 datasheet).
#   l2_latency 20 cycles: ASSUMPTION. No published X60 load-to-use latency for L2 was found (searched: Chips and
#     Cheese, camel-cdr's rvv-bench, K1 board reviews, the C908 manual X60 is said to resemble); 20 cycles is the
#     order of a shared L2 behind an in-order dual-issue core.
#   dram_latency_ns 150: ASSUMPTION. No published K1 DRAM latency was found; 150 ns is the order of LPDDR4X behind a
#     small SoC's interconnect (= 240 cycles at 1.6 GHz).
#   mlp 2: ASSUMPTION. The X60 is in-order (LLVM's X60 scheduling model; the Jupiter roofline page); a vector load
#     spanning several lines is taken to keep two line fills in flight. The traffic model has no prefetcher, so
#     streaming misses are all charged (a prefetcher would hide some: an upper bound on stalls).
#   l2_bytes_per_cycle 32: ASSUMPTION (half a 64-byte line per cycle per cluster); no published figure.
MEMORY: dict[str, MemoryTimings] = {
    "spacemit-x60": MemoryTimings(l2_latency=20, dram_latency_ns=150, mlp=2, dram_gbs=7.0, l2_bytes_per_cycle=32,
                                  cluster=4, source="K1 datasheet and Jupiter roofline (DRAM bandwidth, clusters); "
                                                    "L2/DRAM latency, MLP, L2 bandwidth: stated assumptions"),
}


def memory_timings(name: str) -> MemoryTimings:
    """The memory timings of core ``name``'s part; one ConfigError line for a core without them."""
    return _published(MEMORY, name, "memory timings to estimate its wall time")


@dataclass(frozen=True)
class WallRequest:
    """What an estimated wall time is asked for: the core whose caches and memory model it uses, and the thread
    counts (local-task workers) each call is estimated at."""

    core: Core
    threads: tuple[int, ...]

    def __str__(self) -> str:
        return f"{self.core.name}:{','.join(map(str, self.threads))}"


DEFAULT_WALL_THREADS = (1, 8)  # one thread, and a K1's 8 cores
# Workers for a part no published hart count fixes: IREE's own cap on the workers it detects
# (--task_topology_max_group_count's default, runtime/src/iree/task/api.c)
MAX_THREADS = 64


def wall_request(spec: str, where: str) -> WallRequest:
    """``spacemit-x60`` (or its label ``x60``), optionally ``@GHZ`` and ``:THREADS`` (``x60:1,4,8``; default 1 and
    8). One ConfigError line, naming ``where``, for a core without a clock, published caches or memory timings, and
    for a thread count of 0 or above the harts of the core's part."""
    name, _, counts = spec.strip().partition(":")
    labels = {c.label.lower(): c.name for c in CORES.values()}
    base, at, clock = name.partition("@")
    chosen = core(labels.get(base.strip().lower(), base.strip()) + at + clock, where)
    try:
        cache_hierarchy(chosen.name)
        memory_timings(chosen.name)
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    if chosen.ghz is None:
        raise ConfigError(f"{where}: core {chosen.name} has no clock: give one in GHz, e.g. {chosen.name}@1.6")
    try:
        threads = tuple(dict.fromkeys(int(t) for t in counts.split(",") if t.strip())) or DEFAULT_WALL_THREADS
    except ValueError:
        raise ConfigError(f"{where}: {spec!r}: give thread counts as numbers after ':', e.g. x60:1,4,8") from None
    limit = chosen.harts or MAX_THREADS
    if wrong := [t for t in threads if t < 1 or t > limit]:
        raise ConfigError(f"{where}: {wrong[0]} threads is not a thread count {chosen.name}'s part runs; give 1 to "
                          f"{limit}" + (f" (it ships with {chosen.harts} harts)" if chosen.harts else ""))
    return WallRequest(chosen, threads)
