"""Memory traffic per dispatch: bytes loaded and stored (scalar, and RVV by kind of access) and a core's L1/L2 misses
and DRAM bytes, from one run under QEMU with the rvv_memtrace plugin (run/rvv_memtrace.c holds the cache model).

The plugin totals every instruction that accessed memory; here they are attributed to the dispatch whose code the
instruction is, by the same load-address vote the executed counts use (measure/counts.py), or to a symbol of a
static program (``by_symbol``, for hand-written kernels).

What the model is not (read before trusting a figure): one core's L1D and an L2 it has alone (local-sync runs one
thread), indexed by guest virtual addresses, LRU, no prefetcher; caches start warm with whatever the runtime touched
before the dispatch (its inputs, just read from .npy files); a dirty line's write-back is charged to the instruction
whose miss evicted it (possibly in the next dispatch), and lines still dirty at exit are never written back.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from elftools.elf.elffile import ELFFile
from elftools.elf.sections import SymbolTableSection

from pytest_rvv.base.errors import RvvError
from pytest_rvv.base.process import run_process
from pytest_rvv.base.store import Store, content_sha, digest, source_digest
from pytest_rvv.config.cores import CacheHierarchy, cache_hierarchy
from pytest_rvv.measure.counts import ExecutedCounts, dispatch_at, loaded_libraries
from pytest_rvv.measure.plugin_output import Block, records
from pytest_rvv.measure.plugin_output import block as block_record
from pytest_rvv.measure.plugin_run import PluginRun, plugin_run
from pytest_rvv.measure.static import natural_order
from pytest_rvv.run.qemu import Qemu
from pytest_rvv.run.qemu_plugin import build_memtrace_plugin, memtrace_option
from pytest_rvv.run.recorded import COUNTED
from pytest_rvv.session import Cell

GUEST_ADDRESS_SPACE = "0x200000000"  # 8 GiB reserved for the guest (QEMU -R)
KINDS = ("scalar", "unit", "strided", "indexed", "whole")  # scalar, and RVV unit-stride / strided / indexed / whole
NAMESPACE = "traffic"
RECIPE = "traffic-v1"
_SOURCE = source_digest(__file__, "counts.py")  # what attributes a trace


@dataclass
class Totals:
    """Memory traffic of some instructions: bytes by kind of access, and the cache model's events."""

    accesses: int = 0
    loaded: dict[str, int] = field(default_factory=dict)  # bytes per kind (KINDS)
    stored: dict[str, int] = field(default_factory=dict)
    l1_misses: int = 0
    l2_misses: int = 0  # reads that missed L2: lines read from DRAM
    l1_writebacks: int = 0  # dirty L1 victims written into L2
    l2_writebacks: int = 0  # dirty L2 victims written to DRAM

    def add(self, other: Totals) -> Totals:
        self.accesses += other.accesses
        for mine, theirs in ((self.loaded, other.loaded), (self.stored, other.stored)):
            for kind, n in theirs.items():
                mine[kind] = mine.get(kind, 0) + n
        self.l1_misses += other.l1_misses
        self.l2_misses += other.l2_misses
        self.l1_writebacks += other.l1_writebacks
        self.l2_writebacks += other.l2_writebacks
        return self

    def less(self, other: Totals) -> Totals:
        """What these instructions did beyond ``other`` (a run beside one that did less of the same: a call is the
        one-call run's traffic less the run that only loads)."""
        return Totals(self.accesses - other.accesses,
                      {k: n - other.loaded.get(k, 0) for k, n in self.loaded.items()},
                      {k: n - other.stored.get(k, 0) for k, n in self.stored.items()},
                      self.l1_misses - other.l1_misses, self.l2_misses - other.l2_misses,
                      self.l1_writebacks - other.l1_writebacks, self.l2_writebacks - other.l2_writebacks)

    @property
    def bytes_loaded(self) -> int:
        return sum(self.loaded.values())

    @property
    def bytes_stored(self) -> int:
        return sum(self.stored.values())

    def dram_bytes(self, line: int) -> int:
        """Lines read from DRAM (L2 misses) and written to it (L2 write-backs), in bytes."""
        return (self.l2_misses + self.l2_writebacks) * line

    def as_json(self, line: int | None) -> dict[str, Any]:
        row: dict[str, Any] = {"accesses": self.accesses, "loaded": dict(sorted(self.loaded.items())),
                               "stored": dict(sorted(self.stored.items()))}
        if line is not None:
            row |= {"l1_misses": self.l1_misses, "l2_misses": self.l2_misses, "l1_writebacks": self.l1_writebacks,
                    "l2_writebacks": self.l2_writebacks, "dram_bytes": self.dram_bytes(line)}
        return row


@dataclass
class Trace:
    """What one traced run saw: its translated blocks (to locate the dispatch libraries) and every instruction's
    traffic, by run-time address."""

    target: str
    blocks: list[Block]
    insns: dict[int, Totals]
    geometry: tuple[int, int, int, int, int] | None  # L1 sets, L1 ways, L2 sets, L2 ways, line; None: no cache model

    @property
    def line(self) -> int | None:
        return self.geometry[4] if self.geometry else None

    def total(self, addresses: Iterable[int] | None = None) -> Totals:
        keep = self.insns if addresses is None else {a: self.insns[a] for a in addresses if a in self.insns}
        return sum_totals(keep.values())


def sum_totals(rows: Iterable[Totals]) -> Totals:
    total = Totals()
    for row in rows:
        total.add(row)
    return total


def parse_trace(text: str, source: Path) -> Trace:
    """The plugin's output (one instruction translated into several blocks has several lines: they are summed)."""
    target, lines = records(text, source, "rvv-memtrace")
    trace = Trace(target, [], {}, None)
    for fields in lines:
        if fields[0] == "tb":
            trace.blocks.append(block_record(fields))
        elif fields[0] == "cache":
            sets1, ways1, sets2, ways2, line_bytes = map(int, fields[1:6])
            trace.geometry = (sets1, ways1, sets2, ways2, line_bytes)
        elif fields[0] == "mi":
            kind = fields[2]
            accesses, loaded, stored, l1, l2, wb1, wb2 = map(int, fields[3:10])
            row = Totals(accesses, {kind: loaded} if loaded else {}, {kind: stored} if stored else {}, l1, l2, wb1,
                         wb2)
            vaddr = int(fields[1], 16)
            trace.insns[vaddr] = trace.insns[vaddr].add(row) if vaddr in trace.insns else row
    return trace


def kept_total(trace: Path, store: Store) -> Totals:
    """The traffic of every instruction of a traced run's ``trace`` (``Trace.total``), kept in the store by the trace
    and the code that reads it: a rerun reads the sums back instead of parsing the trace."""
    key = digest(["trace-total-v1", content_sha(trace), _SOURCE])
    found = store.get_or_build("trace-totals", key, lambda tmp: asdict(parse_trace(trace.read_text(), trace).total()))
    return Totals(**found.meta)


def by_symbol(trace: Trace, elf: Path, names: Iterable[str]) -> dict[str, Totals]:
    """The traffic of each named function of a static (non-PIE) program, by its symbol's address range."""
    wanted, ranges = set(names), {}
    with elf.open("rb") as f:
        for section in ELFFile(f).iter_sections():
            if isinstance(section, SymbolTableSection):
                for symbol in section.iter_symbols():
                    if symbol.name in wanted and symbol["st_size"]:
                        ranges[symbol.name] = (symbol["st_value"], symbol["st_value"] + symbol["st_size"])
    missing = wanted - set(ranges)
    if missing:
        raise RvvError(f"{elf}: no function symbol {', '.join(sorted(missing))}")
    return {name: trace.total(a for a in trace.insns if start <= a < end) for name, (start, end) in ranges.items()}


@dataclass
class Traffic:
    """Memory traffic of one module run, per dispatch, on one core's modelled caches."""

    core: str
    caches: CacheHierarchy
    dispatches: dict[str, Totals]
    outside: Totals  # the runtime's own accesses (module loading, buffers, the VM)
    wall_s: float  # the traced run's wall time (machine-bound)

    @property
    def line(self) -> int:
        return self.caches.l1d.line

    def as_json(self) -> dict[str, Any]:
        return {"core": self.core, "line": self.line,
                "dispatches": {k: self.dispatches[k].as_json(self.line) for k in self.dispatches},
                "outside_dispatches": self.outside.as_json(self.line)}

    def table(self) -> str:
        """One line per dispatch: bytes loaded/stored, L1 misses, L2 misses, DRAM bytes."""
        rows = [f"{'dispatch':<60} {'loaded':>10} {'stored':>10} {'L1 miss':>9} {'L2 miss':>9} {'DRAM B':>10}"]
        for name, t in self.dispatches.items():
            rows.append(f"{name[:60]:<60} {t.bytes_loaded:>10} {t.bytes_stored:>10} {t.l1_misses:>9} "
                        f"{t.l2_misses:>9} {t.dram_bytes(self.line):>10}")
        return "\n".join(rows)


def attribute_traffic(trace: Trace, executables: tuple[Path, ...], arch: str) -> tuple[dict[str, Totals], Totals]:
    """Each instruction's traffic summed per dispatch (natural order), and what ran outside the dispatches."""
    loaded = loaded_libraries(ExecutedCounts(trace.target, trace.blocks), executables, arch)
    dispatches: dict[str, Totals] = {}
    outside = Totals()
    for vaddr, row in trace.insns.items():
        key = dispatch_at(loaded, vaddr)
        if key is None:
            outside.add(row)
        else:
            dispatches.setdefault(key, Totals()).add(row)
    return {k: dispatches[k] for k in sorted(dispatches, key=natural_order)}, outside


def trace_program(qemu: Qemu, cpu: str, program: Path, out: Path, plugin: Path,
                  caches: CacheHierarchy | None, per_element: bool = False, timeout_s: float = 300) -> Trace:
    """Run a static riscv64 ``program`` under ``qemu -cpu cpu`` with the plugin and read its trace. The guest's
    address space is reserved up front (as run/runner.py does for modules), so its stack does not follow the host's
    ASLR: the cache model's misses and write-backs are then the same from run to run."""
    argv = [str(qemu.path), "-cpu", cpu, "-R", GUEST_ADDRESS_SPACE,
            *memtrace_option(plugin, out, caches.geometry if caches else None, per_element), str(program)]
    result = run_process(argv, timeout_s=timeout_s)
    if not result.ok:
        raise RvvError(f"{program.name} {result.status()} under the memory-trace plugin: {result.stderr[-300:]}")
    return parse_trace(out.read_text(), out)


def measure_traffic(cell: Cell, workdir: Path, core: str = "spacemit-x60", per_element: bool = False) -> Traffic:
    """Run the cell's module once under QEMU with the memory-trace plugin and ``core``'s cache model, kept in the
    store by content (module, runtime, QEMU and its CPU, plugin, inputs, caches). The run's outputs must agree with
    onnxruntime: the traffic of a wrong result is refused. A core without published caches is one ConfigError.
    When the cell's counted run is not kept yet, this run counts too and is kept as it (``plugin_run``'s ``count``).

    ``per_element``: every access as QEMU reports it, one element at a time (about 30x slower on vector code; the
    default computes unmasked unit-stride and whole-register accesses once per instruction, with the same result)."""
    caches = cache_hierarchy(core)
    runner = cell.given()[0]
    run = _traced_run(cell, workdir, caches, per_element)
    executables, arch = cell.artifact.executables, runner.target.arch
    key = digest(["traffic-attribution-v1", content_sha(run.output), *(content_sha(e) for e in executables), arch,
                  _SOURCE])

    def build(tmp: Path) -> dict[str, Any]:
        """Parsed and attributed once per trace and libraries: a rerun reads the sums back."""
        dispatches, outside = attribute_traffic(parse_trace(run.output.read_text(), run.output), executables, arch)
        return {"dispatches": [[k, asdict(t)] for k, t in dispatches.items()], "outside": asdict(outside)}

    found = cell.store.get_or_build("traffic-attributions", key, build).meta
    return Traffic(core, caches, {k: Totals(**t) for k, t in found["dispatches"]}, Totals(**found["outside"]),
                   run.wall_s)


def trace_before_counting(cell: Cell, workdir: Path, core: str) -> None:
    """Make the cell's traced run on ``core``'s caches now when its counted run is not kept yet, so that the one
    emulation keeps both (for a cell whose traffic will be asked for: the kernel suite's, --rvv-wall-time). Nothing
    when either cannot be made here: the counted run is then made alone, and the traffic's own request says why."""
    if cell.runs is None or cell.runner is None or not cell.runner.capabilities.counted or cell.runs.has(COUNTED):
        return
    # a core without caches, no plugin support, a disagreement: the counted run alone says it
    with contextlib.suppress(RvvError), cell.stages.time("traffic"):
        _traced_run(cell, workdir, cache_hierarchy(core), per_element=False)


def _traced_run(cell: Cell, workdir: Path, caches: CacheHierarchy, per_element: bool) -> PluginRun:
    runner, oracle = cell.given()
    if not runner.capabilities.counted:
        raise ValueError(f"memory traffic needs an emulated target: {runner.target.name} runs "
                         f"{runner.capabilities.where}")
    plugin = build_memtrace_plugin(cell.store)
    return plugin_run(cell, runner, oracle, workdir, namespace=NAMESPACE, recipe=RECIPE, plugin=plugin,
                      key=(repr(caches.geometry), str(per_element)), output="trace.txt",
                      qemu_args=lambda out: memtrace_option(plugin, out, caches.geometry, per_element),
                      what="in the traced run", count=not per_element)
