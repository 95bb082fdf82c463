"""Work per thread: a module run as boards run it (``--device=local-task`` with N workers) under QEMU with the
rvv_counter plugin, its executed blocks counted per guest thread (each its own vCPU in user mode: its ``tv`` lines)
and attributed to dispatches as the executed counts are (measure/counts.py): per dispatch and thread, the workgroups
taken (calls of the dispatch function) and the instructions executed; per thread, the runtime's own work outside the
dispatches. At one thread (``local-sync``) that run is the cell's counted run itself (run/recorded.py): the same
command, the same plugin, so it is emulated once for both.

Est. cycles per thread and dispatch come from llvm-mca on the thread's own executed blocks (measure/silicon.py's
estimate run on that thread's counts), not from a share of the whole dispatch's estimate. A dispatch's time at N
threads is its slowest thread; the runtime's cost of spreading it is measured from the worker threads' instructions
outside dispatch code (``RuntimeCost``), not assumed.

What it is not: which thread takes which workgroup depends on the host's scheduling of the emulated threads (QEMU
runs them as host threads on however many host cores there are), so the split is one sample of the runtime's work
stealing, not the board's; the totals over threads are exact and are held against the one-thread run in the tests.
"""

from __future__ import annotations

import bisect
import functools
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from elftools.elf.elffile import ELFFile
from elftools.elf.sections import SymbolTableSection

from pytest_rvv.base.errors import RvvError
from pytest_rvv.base.store import Store, content_sha, digest, source_digest
from pytest_rvv.config.cores import Core
from pytest_rvv.measure.counts import ExecutedCounts, loaded_libraries, walk_blocks
from pytest_rvv.measure.disassembly import OUTSIDE
from pytest_rvv.measure.plugin_output import Block, records
from pytest_rvv.measure.plugin_output import block as block_record
from pytest_rvv.measure.plugin_run import check_outputs, plugin_run
from pytest_rvv.measure.silicon import estimate_each, find_mca, mca_version
from pytest_rvv.measure.static import dispatch_key, natural_order
from pytest_rvv.run.qemu_plugin import build_plugin, plugin_option
from pytest_rvv.run.recorded import COUNTED
from pytest_rvv.run.threaded import ThreadedRunner
from pytest_rvv.session import Cell

NAMESPACE = "threads"
RECIPE = "threads-v2"  # v2: the counter's per-vCPU lines (run/rvv_counter.c), not a plugin of its own
_SOURCE = source_digest(__file__, "counts.py", "silicon.py", "spills.py")  # what attributes and estimates a run


@dataclass
class ThreadCounts:
    """One run's executed blocks, in total and per vCPU (guest thread): ``per_vcpu[i]`` is block ``i``'s."""

    target: str
    vcpus: int
    blocks: list[Block]
    per_vcpu: list[dict[int, int]]

    def whole(self) -> ExecutedCounts:
        """The run's counts over all threads (each block's total executions)."""
        return ExecutedCounts(self.target, self.blocks)

    def executions(self, vcpu: int) -> list[int]:
        """Each block's executions on one thread (``blocks``' order)."""
        return [e.get(vcpu, 0) for e in self.per_vcpu]

    def totals(self) -> dict[int, int]:
        """Each thread's executed instructions (a thread that ran nothing is absent)."""
        found: dict[int, int] = {}
        for block, execs in zip(self.blocks, self.per_vcpu, strict=True):
            for vcpu, n in execs.items():
                found[vcpu] = found.get(vcpu, 0) + block.n_insns * n
        return found


def parse_threads(text: str, source: Path) -> ThreadCounts:
    """The counter's output per thread: each ``tv`` line belongs to the ``tb`` line before it, and a block without
    any ran on vCPU 0 (the main thread) alone."""
    target, lines = records(text, source, "rvv-counter")
    counts = ThreadCounts(target, 1, [], [])
    split = False  # the current block has tv lines
    for fields in lines:
        if fields[0] == "vcpus":
            counts.vcpus = int(fields[1])
        elif fields[0] == "tb":
            counts.blocks.append(block_record(fields))
            execs = counts.blocks[-1].execs
            counts.per_vcpu.append({0: execs} if execs else {})
            split = False
        elif fields[0] == "tv":
            if not split:
                counts.per_vcpu[-1].clear()
                split = True
            counts.per_vcpu[-1][int(fields[2])] = int(fields[3])
    return counts


@dataclass
class DispatchThreads:
    """One dispatch's work per thread (vCPU index: 0 is the runtime's main thread)."""

    workgroups: dict[int, int] = field(default_factory=dict)  # calls of the dispatch function
    instructions: dict[int, int] = field(default_factory=dict)
    cycles: dict[str, dict[int, int]] = field(default_factory=dict)  # core -> thread -> est. cycles

    def to_json(self) -> dict[str, Any]:
        """Kept in the store: each per-thread figure as [thread, figure] pairs (JSON keys are strings)."""
        return {"workgroups": sorted(self.workgroups.items()), "instructions": sorted(self.instructions.items()),
                "cycles": {core: sorted(row.items()) for core, row in self.cycles.items()}}

    @classmethod
    def from_json(cls, row: dict[str, Any]) -> DispatchThreads:
        return cls({int(t): n for t, n in row["workgroups"]}, {int(t): n for t, n in row["instructions"]},
                   {core: {int(t): n for t, n in pairs} for core, pairs in row["cycles"].items()})

    @property
    def total_workgroups(self) -> int:
        return sum(self.workgroups.values())

    @property
    def total_instructions(self) -> int:
        return sum(self.instructions.values())

    @property
    def busy(self) -> list[int]:
        """The threads that executed any of its code."""
        return sorted(t for t, n in self.instructions.items() if n)

    @property
    def slowest(self) -> int:
        """The most instructions one thread executed in it."""
        return max(self.instructions.values(), default=0)

    @property
    def imbalance(self) -> float:
        """Slowest thread over the mean of the threads that took work (1.0: evenly spread)."""
        busy = [n for n in self.instructions.values() if n]
        return max(busy) / (sum(busy) / len(busy)) if busy else 1.0

    def even_split(self, threads: int) -> int:
        """The slowest thread's instructions had the workgroups (taken as equal) been dealt evenly to ``threads``
        threads: what the work allows, whatever order the emulated threads ran in."""
        total, count = self.total_instructions, self.total_workgroups
        return -(-count // threads) * total // count if count else 0

    def slowest_cycles(self, core: str) -> int:
        return max(self.cycles.get(core, {}).values(), default=0)

    def as_json(self) -> dict[str, Any]:
        return {"workgroups": self.total_workgroups, "instructions": self.total_instructions,
                "per_thread": {str(t): {"workgroups": self.workgroups.get(t, 0), "instructions": n,
                                        **{f"cycles_{c}": v[t] for c, v in self.cycles.items() if t in v}}
                               for t, n in sorted(self.instructions.items()) if n},
                "slowest": self.slowest, "imbalance": round(self.imbalance, 3),
                **{f"slowest_cycles_{c}": self.slowest_cycles(c) for c in self.cycles}}


# The runtime's own functions, by what they do for a run (IREE at b48a5955: runtime/src/iree/hal/drivers/local_task/
# block_processor.c claims and runs tiles; hal/local/local_executable.c and elf/ call into the dispatch library;
# local-sync runs the same calls inline):
# - per workgroup: what runs around each call of a dispatch function
WORKGROUP_PATH = frozenset((
    "iree_hal_cmd_execute_dispatch_tiles", "iree_hal_cmd_execute_dispatch_tiles_profiled",
    "iree_hal_local_executable_issue_call", "iree_hal_elf_executable_issue_call",
    "iree_hal_local_executable_dispatch_inline", "iree_hal_local_executable_issue_dispatch_inline",
    "iree_elf_call_i_ppp", "iree_elf_call_i_p", "iree_elf_call_v_v",
))
# - a thread's start-up, once per run (each worker reads its CPU affinity: 9,261 instructions measured)
START_UP = frozenset(("iree_thread_request_affinity", "start_thread", "iree_thread_start_routine"))
# - the command buffer's copies and fills (buffer transfers, not dispatches), libc's
_COPY = re.compile(r"mem(?:cpy|move|set)|wordcopy|bcopy")
CATEGORIES = ("workgroup", "copies", "start-up", "other")  # other: scheduling and waiting (workers), the VM (main)


@functools.cache  # a name per block of every run: the same few hundred names
def runtime_category(function: str) -> str:
    if function in WORKGROUP_PATH:
        return "workgroup"
    if function in START_UP:
        return "start-up"
    return "copies" if _COPY.search(function) else "other"


@functools.lru_cache(maxsize=4)
def runtime_functions(executable: Path) -> tuple[list[int], list[tuple[int, int, str]]]:
    """The function symbols of a static runtime (start, end, name), sorted, with their starts: ([], []) for a
    runtime without a symbol table (stripped: its work is then only "other")."""
    functions = []
    with executable.open("rb") as f:
        for section in ELFFile(f).iter_sections():
            if isinstance(section, SymbolTableSection) and section.name == ".symtab":
                functions = [(sym["st_value"], sym["st_value"] + sym["st_size"], sym.name)
                             for sym in section.iter_symbols()
                             if sym["st_info"]["type"] == "STT_FUNC" and sym["st_size"]]
    functions.sort()
    return [start for start, _, _ in functions], functions


def function_at(functions: tuple[list[int], list[tuple[int, int, str]]], vaddr: int) -> str:
    starts, ranges = functions
    at = bisect.bisect_right(starts, vaddr) - 1
    return ranges[at][2] if at >= 0 and vaddr < ranges[at][1] else ""


@dataclass(frozen=True)
class RuntimeCost:
    """The runtime's own instructions around the dispatches, measured from the run's counts (not assumed):
    ``per_workgroup``, what runs around each call of a dispatch function (claiming the tile, the call into the
    library: WORKGROUP_PATH), over the workgroups; ``per_dispatch``, what the worker threads execute besides the
    workgroups, their start-up and copies (being woken, looking for work, retiring the region, sleeping again), over
    the dispatches: the least any worker executed, times the workers (None at one thread: local-sync has no workers,
    its main thread's VM work is not separable)."""

    workgroups: int
    dispatches: int
    per_workgroup: float | None  # None: the runtime has no symbol table
    per_dispatch: float | None
    per_worker_per_dispatch: float | None
    copies: int  # the command buffer's copies and fills, all threads
    main_thread: int  # the main thread's instructions outside dispatch code and copies (the VM, submitting, waiting)

    def as_json(self) -> dict[str, Any]:
        def rounded(value: float | None) -> float | None:
            return None if value is None else round(value, 1)

        return {"workgroups": self.workgroups, "dispatches": self.dispatches,
                "per_workgroup": rounded(self.per_workgroup), "per_dispatch": rounded(self.per_dispatch),
                "per_worker_per_dispatch": rounded(self.per_worker_per_dispatch), "copies": self.copies,
                "main_thread": self.main_thread}


@dataclass
class ThreadProfile:
    """One module run with ``threads`` workers: per dispatch and thread, and the runtime's work per thread."""

    threads: int
    vcpus: int  # guest threads seen (the main thread, the workers, and the runtime's async threads)
    dispatches: dict[str, DispatchThreads]
    totals: dict[int, int]  # every instruction each thread executed
    runtime: dict[int, dict[str, int]]  # each thread's instructions outside dispatch code, by CATEGORIES
    wall_s: float  # the emulated run's wall time (machine-bound)
    cores: tuple[str, ...] = ()
    symbols: bool = True  # the runtime had a symbol table (its work is split by category)

    @property
    def workers(self) -> list[int]:
        """The task system's worker threads: vCPUs 1..N, the first threads the runtime starts (local-sync: the main
        thread 0 runs every workgroup itself). The threads started after them (IREE's async I/O workers and
        proactor: five, at every thread count, a few hundred to a few thousand instructions each) take no
        workgroups."""
        return list(range(1, self.threads + 1)) if self.threads > 1 else [0]

    def outside(self, thread: int) -> int:
        return sum(self.runtime.get(thread, {}).values())

    def runtime_cost(self) -> RuntimeCost:
        """The runtime's measured work around the workgroups and dispatches (see RuntimeCost)."""
        workgroups = sum(d.total_workgroups for d in self.dispatches.values())
        ran = sum(1 for d in self.dispatches.values() if d.total_workgroups)
        path = sum(r.get("workgroup", 0) for r in self.runtime.values())
        per_workgroup = path / workgroups if workgroups and self.symbols else None
        per_dispatch = per_worker = None
        if self.threads > 1 and ran and self.symbols:
            # the least any worker executed: an idle worker spins while it waits (IREE's warm-compute spin,
            # runtime/src/iree/task/worker.c, 10 us deadlines in host time that the busy workers keep extending), so
            # a waiting worker's count grows with the emulated duration of the others' work, not with the runtime's
            # (measured at 8 threads: 81x41x19 inner-tiled, one worker took every workgroup and six spun 1.7M-8.6M
            # instructions, while the busy one executed 9.4k outside its workgroups over 3 dispatches)
            per_worker = min(self.runtime.get(t, {}).get("other", 0) for t in self.workers) / ran
            per_dispatch = per_worker * self.threads
        copies = sum(r.get("copies", 0) for r in self.runtime.values())
        main = self.outside(0) - self.runtime.get(0, {}).get("copies", 0)
        return RuntimeCost(workgroups, ran, per_workgroup, per_dispatch, per_worker, copies, main)

    def dispatch_cycles(self, name: str, core: str, runtime_cpi: float = 1.0) -> int:
        """Est. cycles of dispatch ``name`` on ``core`` at this run's threads: its slowest thread (llvm-mca's cycles
        of the dispatch code that thread ran, plus the runtime's measured instructions per workgroup times the
        workgroups it took) plus a worker's measured share of the runtime's cost per dispatch; the runtime's
        instructions count ``runtime_cpi`` cycles each (llvm-mca sees only dispatch code)."""
        d, cost = self.dispatches[name], self.runtime_cost()
        per_workgroup, fixed = cost.per_workgroup or 0.0, cost.per_worker_per_dispatch or 0.0
        slowest = max((c + runtime_cpi * per_workgroup * d.workgroups.get(t, 0)
                       for t, c in d.cycles.get(core, {}).items()), default=0.0)
        return round(slowest + runtime_cpi * fixed)

    def even_cycles(self, name: str, core: str, runtime_cpi: float = 1.0) -> int:
        """``dispatch_cycles`` had the workgroups (taken as equal) been dealt evenly to the workers: what the work
        allows, whichever worker QEMU's host threads let claim them first (on a host with fewer cores than workers,
        one worker can claim several workgroups before the others are scheduled; a board's workers wake together)."""
        d, cost = self.dispatches[name], self.runtime_cost()
        count = d.total_workgroups
        if not count:
            return 0
        share = -(-count // self.threads)
        cycles = sum(d.cycles.get(core, {}).values()) * share / count
        fixed = cost.per_worker_per_dispatch or 0.0
        return round(cycles + runtime_cpi * ((cost.per_workgroup or 0.0) * share + fixed))

    def as_json(self) -> dict[str, Any]:
        return {"threads": self.threads, "vcpus": self.vcpus, "wall_s": self.wall_s,
                "dispatches": {k: d.as_json() | {"even_split": d.even_split(self.threads)}
                               | {f"est_cycles_{c}": self.dispatch_cycles(k, c) for c in self.cores}
                               | {f"even_cycles_{c}": self.even_cycles(k, c) for c in self.cores}
                               for k, d in self.dispatches.items()},
                "totals": {str(t): n for t, n in sorted(self.totals.items())},
                "outside_dispatches": {str(t): dict(r) for t, r in sorted(self.runtime.items())},
                "runtime": self.runtime_cost().as_json()}

    def table(self) -> str:
        """One line per dispatch: workgroups, threads that took some, instructions, slowest thread, an even split,
        slowest/mean, and est. cycles per core."""
        rows = [f"{'dispatch':<50} {'wg':>5} {'thr':>3} {'instructions':>12} {'slowest':>11} {'even':>11} "
                f"{'imbal':>5}" + "".join(f" {'cyc ' + c[-4:]:>11}" for c in self.cores)]
        for name, d in self.dispatches.items():
            rows.append(f"{name[:50]:<50} {d.total_workgroups:>5} {len(d.busy):>3} {d.total_instructions:>12} "
                        f"{d.slowest:>11} {d.even_split(self.threads):>11} {d.imbalance:>5.2f}"
                        + "".join(f" {self.dispatch_cycles(name, c):>11}" for c in self.cores))
        return "\n".join(rows)


def attribute_threads(counts: ThreadCounts, executables: tuple[Path, ...], arch: str, runtime: Path | None = None
                      ) -> tuple[dict[str, DispatchThreads], dict[int, int], dict[int, dict[str, int]]]:
    """Per dispatch and thread: workgroups (blocks at a dispatch function's first instruction) and instructions;
    each thread's instructions in total, and outside dispatch code by CATEGORIES (by the symbols of ``runtime``, a
    static program; without it all is "other")."""
    whole = counts.whole()
    loaded = loaded_libraries(whole, executables, arch)  # located once, from every thread's blocks
    per_block = {id(b): e for b, e in zip(counts.blocks, counts.per_vcpu, strict=True)}
    dispatches: dict[str, DispatchThreads] = {}
    in_dispatch: dict[int, int] = {}  # id(block) -> its instructions in dispatch code
    for block, instructions, i in walk_blocks(whole, executables, arch, loaded):
        body = instructions[i:i + block.n_insns]
        by_key = Counter(dispatch_key(insn.function) for insn in body if insn.function != OUTSIDE)
        in_dispatch[id(block)] = sum(by_key.values())
        first = body[0] if body else None
        entry = (arch == "riscv64" and first is not None and first.function != OUTSIDE
                 and (i == 0 or instructions[i - 1].function != first.function))
        for vcpu, execs in per_block[id(block)].items():
            for key, n in by_key.items():
                d = dispatches.setdefault(key, DispatchThreads())
                d.instructions[vcpu] = d.instructions.get(vcpu, 0) + n * execs
            if entry and first is not None:
                d = dispatches.setdefault(dispatch_key(first.function), DispatchThreads())
                d.workgroups[vcpu] = d.workgroups.get(vcpu, 0) + execs
    functions = runtime_functions(runtime) if runtime is not None else ([], [])
    categories: dict[int, dict[str, int]] = {v: {} for v in range(counts.vcpus)}
    for block, execs in zip(counts.blocks, counts.per_vcpu, strict=True):
        outside = block.n_insns - in_dispatch.get(id(block), 0)
        if outside and execs:
            category = runtime_category(function_at(functions, block.vaddr))
            for vcpu, n in execs.items():
                row = categories.setdefault(vcpu, {})
                row[category] = row.get(category, 0) + outside * n
    ran = counts.totals()
    totals = {v: ran.get(v, 0) for v in categories}
    ordered = {k: dispatches[k] for k in sorted(dispatches, key=natural_order)}
    return ordered, totals, categories


def estimate_threads(counts: ThreadCounts, dispatches: dict[str, DispatchThreads], executables: tuple[Path, ...],
                     arch: str, cores: tuple[Core, ...], store: Store) -> None:
    """Est. cycles of each thread's share of each dispatch on each core: that thread's executed blocks, each at
    its llvm-mca cycles (the run's blocks walked once, and read by llvm-mca once for all threads)."""
    threads = sorted({t for d in dispatches.values() for t in d.busy})
    each = estimate_each(counts.whole(), [counts.executions(v) for v in threads], executables, arch, cores, store)
    for vcpu, estimates in zip(threads, each, strict=True):
        for name, found in estimates.items():
            for key, cycles in found.dispatches.items():
                if key in dispatches and cycles:
                    dispatches[key].cycles.setdefault(name, {})[vcpu] = cycles


def measure_threads(cell: Cell, workdir: Path, threads: int, cores: tuple[Core, ...] = ()) -> ThreadProfile:
    """Run the cell's module once under QEMU with ``threads`` workers and the counter, kept in the store by content
    (module, runtime, QEMU and its CPU, plugin, inputs, threads); one thread (local-sync) is the cell's counted run.
    The run's outputs must agree with onnxruntime: nothing is kept from a run whose result is wrong, nor from one
    killed at the timeout.
    A thread count the target's part cannot run (0, above its harts) is one ConfigError line. ``cores``: est. cycles
    per thread on them (llvm-mca)."""
    runner, oracle = cell.given()
    if not runner.capabilities.counted:
        raise ValueError(f"work per thread needs an emulated target: {runner.target.name} runs "
                         f"{runner.capabilities.where}")
    threaded = ThreadedRunner.like(runner, threads)
    if threads == 1 and cell.runs is not None:  # local-sync: the very run the executed counts come from
        recorded = cell.runs.run(COUNTED, workdir)
        if recorded.counts is None:
            raise RvvError(f"{cell.model.name} on {runner.target.name}: the counted run wrote no counts (did QEMU "
                           "load the counting plugin?)")
        check_outputs(cell, runner, recorded.outputs, oracle, "with 1 thread")
        output, wall_s = recorded.counts, recorded.wall_s
    else:
        plugin = build_plugin(cell.store)
        run = plugin_run(cell, threaded, oracle, workdir, namespace=NAMESPACE, recipe=RECIPE, plugin=plugin,
                         key=(str(threads),), output="counts.txt",
                         qemu_args=lambda out: plugin_option(plugin, out, False), what=f"with {threads} threads")
        output, wall_s = run.output, run.wall_s
    static = runner.runtime.executable if runner.runtime.sysroot is None else None  # a static runtime's symbols
    found = _attributed(output, cell.artifact.executables, runner.target.arch, static, cores, cell.store)
    return ThreadProfile(threads, found["vcpus"], {k: DispatchThreads.from_json(d) for k, d in found["dispatches"]},
                         {int(v): n for v, n in found["totals"]}, {int(v): row for v, row in found["runtime"]}, wall_s,
                         tuple(c.name for c in cores), static is not None and bool(runtime_functions(static)[0]))


def _attributed(output: Path, executables: tuple[Path, ...], arch: str, static: Path | None, cores: tuple[Core, ...],
                store: Store) -> dict[str, Any]:
    """``attribute_threads`` and ``estimate_threads`` of a run's counts, kept in the store by the counts, the
    libraries, the runtime, the cores, llvm-mca and this code: a rerun reads them back instead of parsing and walking
    every block of every thread again (the kernel step's warm rerun spent most of its time there)."""
    key = digest(["thread-profile-v1", content_sha(output), *(content_sha(e) for e in executables), arch,
                  content_sha(static) if static is not None else "", *(repr(c) for c in cores),
                  mca_version(find_mca()) if cores else "", _SOURCE])

    def build(tmp: Path) -> dict[str, Any]:
        counts = parse_threads(output.read_text(), output)
        dispatches, totals, runtime = attribute_threads(counts, executables, arch, static)
        if cores:
            estimate_threads(counts, dispatches, executables, arch, cores, store)
        return {"vcpus": counts.vcpus, "dispatches": [[k, d.to_json()] for k, d in dispatches.items()],
                "totals": sorted(totals.items()), "runtime": sorted(runtime.items())}

    return store.get_or_build("thread-profiles", key, build).meta
