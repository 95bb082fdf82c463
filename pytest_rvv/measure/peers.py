"""A cell beside a peer: IREE's and the peer's executed work per call on the same model, inputs and QEMU CPU.

Per call means the same on both sides: the work one more call adds, the one-time work left out. IREE's is
``executed_per_call_instructions`` (measure/metrics.py): its dispatches' instructions in the counted run less the
module load's (measure/executed.py). A peer's (run/peer.py PEERS: ONNX Runtime, OpenBLAS) is a counted run of two
calls in one process less a run of one call (run/peer.py): loading the library and creating the session are in both
and cancel. A peer's count is every instruction its process executes (its kernels and its framework around them,
libc, libstdc++...), attributed to the library whose code holds each executed block; IREE's is its dispatch code only
(the runtime's own code around the dispatches is not exactly repeatable from run to run and is left out, as in every
IREE count here).

Estimated cycles on CORE use measure/silicon.py's method on both sides: llvm-mca's steady-state cycles of each
executed block times its executions. IREE's are the performance suite's (its dispatch code, the load's left out);
a peer's are the blocks a second call executes, disassembled from the sysroot's own files (stripped, so no
function names, but the bytes are there: a block's instructions start at its address less the library's load
address, from the guest's maps), a vector block with the type of the vsetvli before it in address order.
"""

from __future__ import annotations

import bisect
import json
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from elftools.elf.elffile import ELFFile

from pytest_rvv.base.errors import RvvError, ToolMissing
from pytest_rvv.base.store import Store, content_sha, digest, source_digest
from pytest_rvv.config.cores import CORES, Core, cycles_ms
from pytest_rvv.config.targets import RISCV64
from pytest_rvv.measure.agreement import CheckedRun, peer_agreement
from pytest_rvv.measure.counts import PAGE, parse
from pytest_rvv.measure.disassembly import OUTSIDE, Instruction, objdump_for
from pytest_rvv.measure.executed import measure_executed, measure_one_time
from pytest_rvv.measure.silicon import (
    BlockCode,
    block_cycles,
    estimate_once,
    find_mca,
    mca_line,
    mca_version,
    next_vtype,
)
from pytest_rvv.measure.static import share
from pytest_rvv.model.model import Model
from pytest_rvv.run.onnxruntime import reference_level
from pytest_rvv.run.ort_harness import ORACLE_LEVELS
from pytest_rvv.run.peer import COUNTED_ONE, COUNTED_TWO, ONNXRUNTIME, PEERS, PLAIN, PeerRuns, RecordedPeerRun
from pytest_rvv.run.peer_runner import EmulatedPeerRunner
from pytest_rvv.session import Cell, Oracle

CORE = "spacemit-x60"  # the modelled core of the table's est. ms column
TOP = 3  # IREE dispatches named as what makes the difference
UNMAPPED = "(unmapped)"
_SOURCE = source_digest(__file__, "silicon.py")  # the estimate's method (block_cycles) is part of its key
_LIBRARIES_SOURCE = source_digest(__file__, "counts.py")  # by_library and the counts' parser
# instructions llvm-mca's RISC-V models have no scheduling class for (it refuses the input): left out of their block
_UNSCHEDULED = ("fence", "ebreak", "unimp")
_OBJDUMP_LINE = re.compile(r"^\s*([0-9a-f]+):\t(\S+)(?:\t(.*))?$")  # as measure/disassembly.py reads objdump


@dataclass(frozen=True)
class PeerWork:
    """The peer's side of a cell: its agreement with onnxruntime on the host, its executed work per call by library,
    vector share and peak RSS."""

    peer: str  # "ONNX Runtime 1.21.0 (Debian trixie riscv64, rv64gc)"
    checked: CheckedRun
    per_call: int  # executed instructions one call adds (two calls less one)
    session: int  # what a one-call run executes besides the call (session creation, the harness)
    libraries: dict[str, int]  # per call, by file (libonnxruntime.so.1.21.0, libc.so.6, ...)
    vector: int  # vector instructions per call
    rss_kb: int | None  # the emulator's peak RSS, one call
    estimate: PeerEstimate | None = None  # est. cycles per call on CORE (None without llvm-mca)
    own: str = ""  # the file-name prefix of the peer's own libraries ("libggml"): what its snapshot judges

    @property
    def vector_share(self) -> float:
        return share(self.vector, self.per_call)

    def library_share(self, prefix: str) -> float:
        """The share (%) of a call's work in the libraries whose file name starts with ``prefix``."""
        return share(sum(n for name, n in self.libraries.items() if name.startswith(prefix)), self.per_call)

    def snapshot(self) -> dict[str, Any]:
        """What a change in the peer's work shows in (deterministic: one thread, QEMU's reserved address space)."""
        return {"peer": self.peer, "per_call_instructions": self.per_call,
                "libraries": {k: v for k, v in sorted(self.libraries.items()) if v}}


@dataclass(frozen=True)
class IreeWork:
    """IREE's side: its dispatches' executed instructions per call, vector share and est. cycles on CORE."""

    dispatches: dict[str, int]  # per call
    vector: int  # per call
    est_ms: float | None  # est. ms per call on CORE (None: llvm-mca missing)

    @property
    def per_call(self) -> int:
        return sum(self.dispatches.values())

    @property
    def vector_share(self) -> float:
        return share(self.vector, self.per_call)

    def top(self, n: int = TOP) -> list[tuple[str, int]]:
        return sorted(self.dispatches.items(), key=lambda kv: -kv[1])[:n]

    @property
    def pack_share(self) -> float:
        """The share (%) of a call's work in dispatches named pack or unpack (data layout, not arithmetic)."""
        return share(sum(n for k, n in self.dispatches.items() if "pack" in k), self.per_call)


@dataclass(frozen=True)
class PeerThreads:
    """One call of the peer on ``threads`` threads of its own."""

    threads: int
    per_thread: tuple[int, ...]  # executed instructions of one call: the main thread, then the workers, most first
    waited: int  # instructions of waiting blocks left out, in the one-call run's first sample
    busiest_cycles: float | None  # est. cycles on CORE of the busiest thread's share (None: llvm-mca missing)
    covered_percent: float | None  # of the busiest thread's instructions, what the estimate covers
    ghz: float
    thread_cycles: tuple[float, ...] = ()  # est. cycles on CORE of each thread's share, per_thread's order

    @property
    def work(self) -> int:
        """The call's work summed over the threads (the one-thread call's, plus what splitting it costs)."""
        return sum(self.per_thread)

    @property
    def balance(self) -> float:
        """The busiest thread's share over an even split's (1.0: even)."""
        return max(self.per_thread) * len(self.per_thread) / self.work if self.work else 1.0

    @property
    def busiest_ms(self) -> float | None:
        return None if self.busiest_cycles is None else cycles_ms(self.busiest_cycles, self.ghz)

    def row(self) -> dict[str, object]:
        """results.json's ``threads`` of a peer row."""
        return {"threads": self.threads, "per_thread_instructions": list(self.per_thread),
                "work_instructions": self.work, "waited_instructions": self.waited,
                "balance": round(self.balance, 3), "core": CORE,
                "busiest_est_ms": None if self.busiest_ms is None else round(self.busiest_ms, 3),
                "busiest_est_covered_percent": self.covered_percent}


@dataclass(frozen=True)
class WallBeside:
    """IREE's and the peer's est. wall time of one call on CORE at ``threads`` threads, each with what bounds it
    (measure/walltime.py's model: in-core cycles per thread, stalls on L2 hits and DRAM misses, bandwidth floors)."""

    threads: int
    iree_ms: float | None
    iree_bound: str | None
    peer_ms: float
    peer_bound: str

    @property
    def ratio(self) -> float | None:
        """IREE's est. wall ms / the peer's."""
        return self.iree_ms / self.peer_ms if self.iree_ms is not None and self.peer_ms else None

    def row(self) -> dict[str, object]:
        return {"threads": self.threads, "iree_ms": None if self.iree_ms is None else round(self.iree_ms, 3),
                "iree_bound_by": self.iree_bound, "peer_ms": round(self.peer_ms, 3), "peer_bound_by": self.peer_bound,
                "ratio": None if self.ratio is None else round(self.ratio, 4)}


@dataclass(frozen=True)
class ThreadsBeside:
    """IREE's cell and its peer, each at ``threads`` threads: est. ms per call on CORE of the busiest threads (IREE:
    each dispatch's workgroups dealt evenly to the workers, measure/threads.py; the peer: its busiest thread, above);
    and, where the peer's memory traffic was traced, both sides' est. wall time at one thread and at ``threads``
    (``walls``)."""

    threads: int
    iree_ms: float | None
    peer: PeerThreads
    walls: tuple[WallBeside, ...] = ()
    peer_dram_bytes: int | None = None  # the peer's DRAM bytes per call, one thread, on CORE's modelled caches

    @property
    def est_ratio(self) -> float | None:
        """IREE's est. ms / the peer's, at ``threads`` threads."""
        peer = self.peer.busiest_ms
        return self.iree_ms / peer if self.iree_ms is not None and peer else None

    def row(self) -> dict[str, object]:
        """A peer row's ``threads`` (results.json)."""
        row: dict[str, object] = {
            "threads": self.threads, "iree_est_ms": None if self.iree_ms is None else round(self.iree_ms, 3),
            "peer": self.peer.row(), "est_ratio": None if self.est_ratio is None else round(self.est_ratio, 4)}
        if self.walls:
            row["wall"] = [w.row() for w in self.walls]
            row["peer_dram_bytes"] = self.peer_dram_bytes
        return row


@dataclass(frozen=True)
class PeerComparison:
    """One model x target: IREE beside its peer."""

    model: str
    target: str
    iree: IreeWork
    peer: PeerWork
    peer_name: str  # the plug-in (run/peer.py PEERS)
    toolchain: str = ""
    notes: list[str] = field(default_factory=list)
    threads: ThreadsBeside | None = None  # both sides at a board's threads (a peer whose harness runs threads)

    @property
    def ratio(self) -> float | None:
        """IREE's work per call / the peer's."""
        return self.iree.per_call / self.peer.per_call if self.peer.per_call else None

    @property
    def est_ratio(self) -> float | None:
        """IREE's est. ms per call on CORE / the peer's."""
        peer = self.peer.estimate
        return self.iree.est_ms / peer.ms if self.iree.est_ms is not None and peer is not None and peer.cycles \
            else None

    def row(self) -> dict[str, Any]:
        """The table's row (the test's record, results.json's ``peers``)."""
        return {"model": self.model, "target": self.target, "toolchain": self.toolchain, "peer": self.peer.peer,
                "peer_name": self.peer_name,
                "iree": {"per_call_instructions": self.iree.per_call, "vector_share_percent": self.iree.vector_share,
                         "est_ms": None if self.iree.est_ms is None else round(self.iree.est_ms, 3), "core": CORE,
                         "top_dispatches": [{"dispatch": k, "instructions": n, "share_percent": share(n,
                                                                                                    self.iree.per_call)}
                                            for k, n in self.iree.top()],
                         "pack_share_percent": self.iree.pack_share},
                "peer_work": {"per_call_instructions": self.peer.per_call, "session_instructions": self.peer.session,
                                "vector_share_percent": self.peer.vector_share,
                                "est_ms": None if self.peer.estimate is None else round(self.peer.estimate.ms, 3),
                                "est_covered_percent": None if self.peer.estimate is None
                                else self.peer.estimate.covered_percent,
                                "libraries": dict(sorted(self.peer.libraries.items(), key=lambda kv: -kv[1])),
                                "library": self.peer.own,
                                "library_share_percent": self.peer.library_share(self.peer.own),
                                "peak_rss_kb": self.peer.rss_kb,
                                "max_abs_error": self.peer.checked.agreement.max_abs},
                "ratio": None if self.ratio is None else round(self.ratio, 4),
                "est_ratio": None if self.est_ratio is None else round(self.est_ratio, 4), "notes": self.notes} | (
                    {"threads": self.threads.row()} if self.threads is not None else {})


@dataclass(frozen=True)
class IreeCall:
    """IREE's side of a peers table row, as recorded: a call's work, vector share, est. ms on CORE, its top dispatches
    (name, share of the work in percent) and the pack/unpack share."""

    per_call: int
    vector_share: float
    est_ms: float | None
    top: tuple[tuple[str, float], ...]
    pack_share: float


@dataclass(frozen=True)
class PeerCall:
    """The peer's side of a row, as recorded: a call's work, vector share, est. ms on CORE and the share of the work in
    the peer's own library (None in rows that did not record it)."""

    per_call: int
    vector_share: float
    est_ms: float | None
    library_share: float | None


@dataclass(frozen=True)
class WallRow:
    """Both sides' est. wall ms of one call at ``threads`` threads and what bounds each, with their recorded ratio."""

    threads: int
    iree_ms: float | None
    iree_bound: str | None
    peer_ms: float
    peer_bound: str
    ratio: float | None


@dataclass(frozen=True)
class ThreadsRow:
    """A row's sides at a board's threads, as recorded (``ThreadsBeside.row``): IREE's and the peer's busiest-thread
    est. ms and their ratio, the peer's work per thread (main first), balance and waiting left out, the est. wall times
    (one thread and ``threads``) and the peer's DRAM bytes per call."""

    threads: int
    iree_est_ms: float | None
    peer_est_ms: float | None
    est_ratio: float | None
    per_thread: tuple[int, ...]
    balance: float
    waited: int
    walls: tuple[WallRow, ...] = ()
    peer_dram_bytes: int | None = None

    def wall(self, threads: int) -> WallRow | None:
        return next((w for w in self.walls if w.threads == threads), None)


@dataclass(frozen=True)
class PeerRow:
    """One row of the peers tables as a peer test recorded it (``PeerComparison.row``: what crosses from xdist workers
    and what results.json's ``peers`` holds, ``to_json``), read once into attributes for the reports. Rows written
    before peers were plug-ins name the peer's side ``onnxruntime`` and have no ``peer_name``."""

    model: str
    target: str
    toolchain: str | None
    peer: str  # what ran: "ONNX Runtime 1.21.0+dfsg-1 (Debian trixie riscv64, rv64gc)"
    name: str  # the plug-in (run/peer.py PEERS)
    ratio: float | None
    est_ratio: float | None
    iree: IreeCall
    work: PeerCall
    threads: ThreadsRow | None
    recorded: dict[str, Any] = field(compare=False, repr=False)

    @classmethod
    def from_json(cls, row: dict[str, Any]) -> PeerRow:
        iree, work, threads = row["iree"], row.get("peer_work") or row["onnxruntime"], row.get("threads")
        return cls(
            row["model"], row["target"], row.get("toolchain"), row["peer"], str(row.get("peer_name") or ONNXRUNTIME),
            row["ratio"], row.get("est_ratio"),
            IreeCall(iree["per_call_instructions"], iree["vector_share_percent"], iree["est_ms"],
                     tuple((d["dispatch"], d["share_percent"]) for d in iree["top_dispatches"]),
                     iree["pack_share_percent"]),
            PeerCall(work["per_call_instructions"], work["vector_share_percent"], work.get("est_ms"),
                     work.get("library_share_percent", work.get("libonnxruntime_share_percent"))),
            None if not threads else ThreadsRow(
                threads["threads"], threads["iree_est_ms"], threads["peer"]["busiest_est_ms"], threads["est_ratio"],
                tuple(threads["peer"]["per_thread_instructions"]), threads["peer"]["balance"],
                threads["peer"]["waited_instructions"],
                tuple(WallRow(w["threads"], w["iree_ms"], w["iree_bound_by"], w["peer_ms"], w["peer_bound_by"],
                              w["ratio"]) for w in threads.get("wall", [])),
                threads.get("peer_dram_bytes")),
            row)

    def to_json(self) -> dict[str, Any]:
        """The row as recorded (results.json's ``peers``)."""
        return self.recorded

    @property
    def key(self) -> tuple[str, str, str]:
        """model, target, peer: one row per key (a test run again replaces its row)."""
        return self.model, self.target, self.name

    @property
    def title(self) -> str:
        """The peer's name as people write it: ``ONNX Runtime``, ``OpenBLAS``."""
        found = PEERS.get(self.name)
        return found.title if found is not None else self.name


def ordered(rows: list[PeerRow]) -> list[PeerRow]:
    """Peer rows by model, target and peer: every table and judgement reads them in this order (ties go the same way
    on every run)."""
    return sorted(rows, key=lambda r: r.key)


def by_library(run: RecordedPeerRun) -> tuple[dict[str, int], int]:
    """A counted peer run's executed instructions per library, and its vector instructions."""
    assert run.counts is not None
    counts = parse(run.counts.read_text(), run.counts)
    libraries: dict[str, int] = {}
    vector = 0
    for block in counts.blocks:
        name = run.library_of(block.vaddr) or UNMAPPED
        libraries[name] = libraries.get(name, 0) + block.n_insns * block.execs
        vector += (block.varith + block.vmem + block.vset) * block.execs
    return libraries, vector


def kept_by_library(run: RecordedPeerRun, store: Store) -> tuple[dict[str, int], int]:
    """``by_library``, kept in the store by the run's counts, its files' code ranges and the code that sums them: a
    peer's counted run holds some 80,000 blocks, which a rerun no longer parses."""
    assert run.counts is not None
    key = digest(["peer-libraries-v1", content_sha(run.counts), json.dumps(run.code, sort_keys=True),
                  _LIBRARIES_SOURCE])

    def build(tmp: Path) -> dict[str, Any]:
        libraries, vector = by_library(run)
        return {"libraries": libraries, "vector": vector}

    meta = store.get_or_build("peer-libraries", key, build).meta
    return dict(meta["libraries"]), int(meta["vector"])


def measure_peer(model: Model, oracle: Oracle, runner: EmulatedPeerRunner, runs: PeerRuns,
                 estimated: bool = False, own: str = "") -> PeerWork:
    """The peer on the model's prepared file and seeded inputs (the oracle's, as IREE's cell): agreement (one call),
    per-call work (two calls less one), peak RSS, and with ``estimated`` its est. cycles per call on CORE. Needs
    nothing of IREE's. Raises RunFailed / PeerRejected (one line
    naming the model) when it cannot run the model."""
    level = ORACLE_LEVELS[reference_level(oracle.prepared)]
    args = (runner, oracle.prepared, oracle.inputs, len(oracle.outputs), level, model.name)
    plain = runs.run(PLAIN, *args)
    agreement, = peer_agreement([plain.outputs], oracle, model, runner)
    checked = CheckedRun(model.name, runner.target.name, agreement, f" ({runner.describe()})", plain.repro)
    counted = [runs.run(kind, *args) for kind in (COUNTED_ONE, COUNTED_TWO)]
    (one, vector_one), (two, vector_two) = (kept_by_library(run, runs.store) for run in counted)
    libraries = {name: two.get(name, 0) - one.get(name, 0) for name in {*one, *two}}
    per_call = sum(libraries.values())
    # on CORE only where the target's code would run there as it ran here (its VLEN: a peer's vector code iterates
    # by it, as Target.cores() holds for IREE's)
    modelled = any(core.name == CORE for core in runner.target.cores())
    with runs.stages.time("estimate"):
        estimate = estimate_peer(*counted, runner, runs.store) \
            if estimated and modelled else None
    return PeerWork(runner.describe(), checked, per_call, sum(one.values()) - per_call,
                    {k: v for k, v in libraries.items() if v}, vector_two - vector_one, plain.rss_kb, estimate, own)


def measure_iree(cell: Cell, workdir: Path) -> IreeWork:
    """IREE's dispatches per call: the counted run less the module load, dispatch by dispatch, and its est. ms on
    CORE (None when llvm-mca is missing or the target's cores leave CORE out)."""
    run, load = measure_executed(cell, workdir / "counted"), measure_one_time(cell, workdir / "loaded")
    call = run.per_call(load)
    per_call = {k: work for k, (work, _) in call.items()}
    vector = sum(v for _, v in call.values())
    cores = cell.target.cores()  # as measure/performance.py estimates them: the same store entries
    core = next((c for c in cores if c.name == CORE), None)
    est_ms = None
    if core is not None and core.ghz and run.run.counts is not None and load.run.counts is not None:
        arch, executables = cell.target.arch, cell.artifact.executables
        try:
            with cell.stages.time("estimate"):
                cycles = [estimate_once(m.parsed, m.run.counts, executables, arch, cores, cell.store)[CORE].total
                          if m.per_dispatch else 0  # a load that runs no dispatch: nothing to estimate
                          for m in (run, load) if m.run.counts is not None]
            est_ms = cycles_ms(cycles[0] - cycles[1], core.ghz)
        except ToolMissing:
            pass
    return IreeWork({k: n for k, n in per_call.items() if n > 0}, vector, est_ms)


@dataclass(frozen=True)
class PeerEstimate:
    """The peer's est. cycles per call on CORE, and the share (%) of its per-call work the estimate covers (blocks in
    files the sysroot holds; the vDSO is not one)."""

    cycles: float
    covered_percent: float
    ghz: float

    @property
    def ms(self) -> float:
        return cycles_ms(self.cycles, self.ghz)


def _exec_segment_vaddr(elf: Path) -> int:
    """The page-truncated virtual address of ``elf``'s executable PT_LOAD segment (where its code mapping starts)."""
    with elf.open("rb") as f:
        for segment in ELFFile(f).iter_segments():
            if segment["p_type"] == "PT_LOAD" and segment["p_flags"] & 1:
                return int(segment["p_vaddr"]) & ~(PAGE - 1)
    raise RvvError(f"{elf}: no executable segment")


# Blocks closer than this share one objdump range; each range starts this far before its first block, so that the
# vsetvli a vector block's type comes from (the nearest before it in address order) is decoded too.
_RANGE_GAP = 1 << 16
_RANGE_LEAD = 1 << 16


def _ranges(windows: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The address ranges to disassemble for sorted ``windows`` (start, end): near windows merged, each led in."""
    ranges: list[list[int]] = []
    for low, high in windows:
        if ranges and low - ranges[-1][1] < _RANGE_GAP:
            ranges[-1][1] = max(ranges[-1][1], high)
        else:
            ranges.append([low, high])
    return [(max(0, low - _RANGE_LEAD), high) for low, high in ranges]


def _block_codes(elf: Path, starts: dict[int, int]) -> dict[int, BlockCode]:
    """Each block's instructions as llvm-mca reads them, by its first instruction's address in ``elf`` (``starts``:
    address -> instructions), from objdump over the address ranges that hold them (a library is large; the blocks a
    call runs are few); a block objdump does not start there is left out.

    A block with vector instructions carries the (SEW, LMUL) of the nearest vsetvli before it in address order (the
    files are stripped: no function bounds; a vectorized loop sets its type in its own block, where this matters)."""
    windows = sorted((start, start + 4 * n) for start, n in starts.items())
    lows = [low for low, _ in windows]
    decoded: dict[int, Instruction] = {}
    vtypes: dict[int, tuple[str, str]] = {}  # in force at each decoded instruction
    for low, high in _ranges(windows):
        proc = subprocess.run([str(objdump_for(RISCV64)), "-d", "--no-show-raw-insn", f"--start-address={low:#x}",
                               f"--stop-address={high:#x}", str(elf)], capture_output=True, text=True, timeout=600)
        if proc.returncode != 0:
            raise ToolMissing(f"objdump failed on {elf}: {proc.stderr.strip()[:200]}")
        vtype = ("", "")
        for line in proc.stdout.splitlines():
            match = _OBJDUMP_LINE.match(line)
            if not match or match.group(2).startswith("."):
                continue
            address = int(match.group(1), 16)
            operands = (match.group(3) or "").split("#")[0].split("<")[0].strip()
            i = bisect.bisect_right(lows, address) - 1
            if i >= 0 and address < max(high for _, high in windows[max(0, i - 8):i + 1]):
                decoded[address] = Instruction(address, match.group(2), operands, OUTSIDE)
                vtypes[address] = vtype
            if match.group(2).startswith("vset"):
                vtype = next_vtype(vtype, Instruction(address, match.group(2), operands, OUTSIDE))
    addresses = sorted(decoded)
    codes = {}
    for start, n in starts.items():
        at = bisect.bisect_left(addresses, start)
        if at < len(addresses) and addresses[at] == start and len(addresses[at:at + n]) == n:
            body = [decoded[a] for a in addresses[at:at + n]]
            lines = tuple(mca_line(insn) for insn in body if not insn.mnemonic.startswith(_UNSCHEDULED))
            vector = any(insn.mnemonic.startswith("v") for insn in body)
            codes[start] = BlockCode(lines, *(vtypes[start] if vector else ("", "")))
    return codes


BlockKey = tuple[str, int, int]  # a peer's block: its file, its offset in that file's code mapping, its instructions


def block_key(run: RecordedPeerRun, vaddr: int, n_insns: int, bases: dict[str, int]) -> BlockKey | None:
    """The block at guest ``vaddr`` as the same block in every run of the peer (None outside its files: the vDSO);
    ``bases`` holds each file's code address across the runs compared (one line when a file moved)."""
    name = run.library_of(vaddr)
    if name is None:
        return None
    start = min(s for s, _ in run.code[name])
    if bases.setdefault(name, start) != start:
        raise RvvError(f"{name} was loaded at two addresses in the peer's counted runs")
    return name, vaddr - start, n_insns


def cycles_per_execution(keys: list[BlockKey], runner: EmulatedPeerRunner, core: Core,
                         store: Store) -> dict[BlockKey, float]:
    """llvm-mca's steady-state cycles on ``core`` of one execution of each block, from the sysroot's own files
    (stripped: no function names, but the bytes are there; a vector block gets the type of the vsetvli before it); a
    block whose file or bytes are not found is left out (what the estimate does not cover)."""
    codes: dict[BlockKey, BlockCode] = {}
    for name in sorted({name for name, _, _ in keys}):
        elf = runner.code_file(name)
        if elf is None or not elf.resolve().is_file():
            continue
        base_vaddr = _exec_segment_vaddr(elf.resolve())
        mine = [k for k in keys if k[0] == name]
        found = _block_codes(elf.resolve(), {offset + base_vaddr: n for _, offset, n in mine})
        for key in mine:
            code = found.get(key[1] + base_vaddr)
            if code is not None and code.lines:
                codes[key] = code
    cycles, _, _ = block_cycles(list(dict.fromkeys(codes.values())), core, store)
    return {key: cycles[code] for key, code in codes.items()}


def estimate_peer(one: RecordedPeerRun, two: RecordedPeerRun, runner: EmulatedPeerRunner,
                  store: Store) -> PeerEstimate | None:
    """Est. cycles of one call on CORE: llvm-mca's steady-state cycles of every block the second call executes
    (execs in the two-call run less the one-call run), from the sysroot's own files (stripped: no function names,
    but the bytes are there; a vector block gets the type of the vsetvli before it). None without llvm-mca."""
    core = CORES[CORE]
    if one.counts is None or two.counts is None or not core.ghz:
        return None
    try:
        mca = find_mca()
    except ToolMissing:
        return None
    key = digest(["peer-estimate-v2", content_sha(one.counts), content_sha(two.counts), json.dumps(one.code),
                  json.dumps(two.code), *runner.identity(), repr(core), mca_version(mca), _SOURCE])

    def build(tmp: Path) -> dict[str, Any]:
        delta: dict[BlockKey, int] = {}
        bases: dict[str, int] = {}
        for sign, run in ((-1, one), (1, two)):
            assert run.counts is not None
            for block in parse(run.counts.read_text(), run.counts).blocks:
                found = block_key(run, block.vaddr, block.n_insns, bases)
                if found is not None:
                    delta[found] = delta.get(found, 0) + sign * block.execs
        work = sum(n * d for (_, _, n), d in delta.items())
        per = cycles_per_execution([k for k, d in delta.items() if d], runner, core, store)
        return {"cycles": sum(delta[k] * c for k, c in per.items()),
                "covered_percent": share(sum(k[2] * delta[k] for k in per), work)}

    entry = store.get_or_build("peer-estimates", key, build)
    return PeerEstimate(float(entry.meta["cycles"]), float(entry.meta["covered_percent"]), core.ghz)
