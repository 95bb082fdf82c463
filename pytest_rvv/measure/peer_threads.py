"""A peer's work per thread when it runs a call on threads of its own (OpenBLAS's server threads, ggml's pool), as a
board runs it: what each thread executes of one call, and the busiest thread's est. cycles on CORE.

Under QEMU such a run is not deterministic: an idle worker spins, waiting for work, for as long as the host lets it
(measured, OpenBLAS 256^3 at 8 threads: 157 M to 500 M instructions in all from run to run, 4.4 M of them one call).
The work is: a block that computes, packs or hands out the call executes the same number of times in every run. So
every threaded run is made twice (two samples of the same content, each recorded: run/peer.py), and a block whose
executions differ between the two is waiting, left out. Of what is left, each thread's (vCPU's: QEMU numbers the
guest's threads in the order they start, the same in both runs of one content) share of a call is its blocks in the
two-call run less the one-call run: the load, the harness and what a thread does before the first call cancel (ncnn's
OpenMP workers start while the net loads and pack its weights; OpenBLAS's start at the first call, ggml's pool may
start anew per call: a thread the one-call run does not have keeps all it did, its start-up included).

The busiest thread's est. cycles bound one call's time at N threads from below: waits between the threads and the
memory system are not in them (the one-thread estimate leaves the memory system out too).
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import replace
from pathlib import Path

from pytest_rvv.base.errors import ConfigError, RvvError, ToolMissing
from pytest_rvv.base.store import content_sha, digest, source_digest
from pytest_rvv.config.cores import CORES, Core, cache_hierarchy, cycles_ms, memory_timings
from pytest_rvv.measure.agreement import peer_agreement
from pytest_rvv.measure.peers import (
    CORE,
    BlockKey,
    PeerThreads,
    ThreadsBeside,
    WallBeside,
    block_key,
    cycles_per_execution,
)
from pytest_rvv.measure.silicon import find_mca, mca_version
from pytest_rvv.measure.static import share
from pytest_rvv.measure.threads import measure_threads, parse_threads
from pytest_rvv.measure.traffic import Totals, kept_total, measure_traffic
from pytest_rvv.measure.walltime import DispatchWall, dispatch_wall, estimate_cell
from pytest_rvv.model.model import Model
from pytest_rvv.run.peer import COUNTED_ONE, COUNTED_TWO, TRACED_ONE, TRACED_ZERO, PeerRuns, RecordedPeerRun
from pytest_rvv.run.peer_runner import EmulatedPeerRunner
from pytest_rvv.session import Cell, Oracle

SAMPLES = (1, 2)  # the two samples of each threaded run (sample 0 is the one-thread runs' own key)
_SOURCE = source_digest(__file__, "peers.py", "silicon.py")


def _per_thread(run: RecordedPeerRun, bases: dict[str, int]) -> dict[int, Counter[BlockKey]]:
    """Each thread's executions of each block of the peer's files (vDSO left out)."""
    assert run.counts is not None
    counts = parse_threads(run.counts.read_text(), run.counts)
    found: dict[int, Counter[BlockKey]] = {}
    for block, execs in zip(counts.blocks, counts.per_vcpu, strict=True):
        key = block_key(run, block.vaddr, block.n_insns, bases)
        if key is not None:
            for vcpu, n in execs.items():
                found.setdefault(vcpu, Counter())[key] += n
    return found


def _instructions(blocks: Counter[BlockKey]) -> int:
    """The instructions ``blocks`` executed (each block's size times its executions)."""
    return sum(k[2] * n for k, n in blocks.items())


def _totals(threads: dict[int, Counter[BlockKey]]) -> Counter[BlockKey]:
    out: Counter[BlockKey] = Counter()
    for blocks in threads.values():
        out.update(blocks)
    return out


def split_work(one: tuple[RecordedPeerRun, RecordedPeerRun],
               two: tuple[RecordedPeerRun, RecordedPeerRun]) -> tuple[list[Counter[BlockKey]], int]:
    """One call's block executions per thread (the main thread first), from two samples of the one-call and of the
    two-call run; and the instructions of waiting blocks left out of the one-call run's first sample."""
    bases: dict[str, int] = {}
    ones = [_per_thread(run, bases) for run in one]
    twos = [_per_thread(run, bases) for run in two]
    seen: set[BlockKey] = set()
    unsteady: set[BlockKey] = set()  # a block whose executions differ between the two samples of a run: waiting
    for first, second in ((ones[0], ones[1]), (twos[0], twos[1])):
        a, b = _totals(first), _totals(second)
        seen |= a.keys() | b.keys()
        unsteady |= {k for k in a.keys() | b.keys() if a[k] != b[k]}
    steady = seen - unsteady
    def call(vcpu: int) -> Counter[BlockKey]:
        before, after = ones[0].get(vcpu, Counter()), twos[0].get(vcpu, Counter())
        return Counter({k: after[k] - before[k] for k in steady if after[k] != before[k]})

    main = call(0)
    workers = [w for vcpu in sorted(ones[0].keys() | twos[0].keys()) if vcpu != 0 and (w := call(vcpu))]
    workers.sort(key=lambda w: -_instructions(w))
    waited = _instructions(Counter({k: n for k, n in _totals(ones[0]).items() if k not in steady}))
    return [main, *workers], waited


def measure_peer_threads(model: Model, oracle: Oracle, runner: EmulatedPeerRunner, runs: PeerRuns,
                         threads: int) -> PeerThreads:
    """The peer's one call split over ``threads`` threads of its own (``with_threads``). Each threaded run's outputs
    must agree with onnxruntime's (one line naming the model if not)."""
    threaded = runner.with_threads(threads)
    args = (threaded, oracle.prepared, oracle.inputs, len(oracle.outputs), "all", model.name)
    one = tuple(runs.run(COUNTED_ONE, *args, sample=s) for s in SAMPLES)
    two = tuple(runs.run(COUNTED_TWO, *args, sample=s) for s in SAMPLES)
    for agreement in peer_agreement([run.outputs for run in (*one, *two)], oracle, model, runner):
        if not agreement.ok:
            raise RvvError(f"{model.name} on {runner.target.name}: {runner.describe()} with {threads} threads "
                           f"disagrees with onnxruntime\n{agreement.report()}")
    with runs.stages.time("estimate"):
        split, waited, cycles, covered, each = _estimated(one, two, threaded, runs)
    per_thread = [_instructions(blocks) for blocks in split]
    return PeerThreads(threads, tuple(per_thread), waited, cycles, covered, CORES[CORE].ghz, each)


def _estimated(one: tuple[RecordedPeerRun, ...], two: tuple[RecordedPeerRun, ...], runner: EmulatedPeerRunner,
               runs: PeerRuns) -> tuple[list[Counter[BlockKey]], int, float | None, float | None, tuple[float, ...]]:
    """The split (``split_work``), the busiest thread's est. cycles and coverage, and every thread's est. cycles
    (the split's order), kept in the store by the runs' content (a rerun reads them back)."""
    assert len(one) == 2 and len(two) == 2
    split, waited = split_work((one[0], one[1]), (two[0], two[1]))
    busiest = max(split, key=lambda blocks: _instructions(blocks))
    try:
        mca = find_mca()
    except ToolMissing:  # the split stands without an estimate
        return split, waited, None, None, ()
    core = CORES[CORE]
    key = digest(["peer-threads-v2", *(content_sha(r.counts) for r in (*one, *two) if r.counts),
                  *(json.dumps(r.code) for r in (*one, *two)), *runner.identity(), repr(core), mca_version(mca),
                  _SOURCE])

    def build(tmp: Path) -> dict[str, object]:
        per = cycles_per_execution(sorted({k for blocks in split for k, n in blocks.items() if n}), runner, core,
                                   runs.store)
        work = _instructions(busiest)
        return {"cycles": sum(busiest[k] * per.get(k, 0.0) for k in busiest),
                "covered_percent": share(sum(k[2] * busiest[k] for k in busiest if k in per), work),
                "thread_cycles": [sum(blocks[k] * per.get(k, 0.0) for k in blocks) for blocks in split]}

    entry = runs.store.get_or_build("peer-estimates", key, build)
    meta = entry.meta
    return (split, waited, float(meta["cycles"]), float(meta["covered_percent"]),
            tuple(float(c) for c in meta["thread_cycles"]))


def peer_traffic(model: Model, oracle: Oracle, runner: EmulatedPeerRunner, runs: PeerRuns) -> tuple[Totals, int]:
    """The peer's memory traffic of one call on one thread through CORE's modelled caches: a run that loads the
    library and makes no call, and one that makes one (each kept by content), and the second's traffic less the
    first's over every instruction of the process (the load, the harness and its files cancel), as IREE's
    one-thread traced run is its call after the module's load. Also the line size. The one-call run's outputs
    must agree with onnxruntime's (one line naming the model if not)."""
    caches = cache_hierarchy(CORE)
    args = (runner, oracle.prepared, oracle.inputs, len(oracle.outputs), "all", model.name)
    zero, one = (runs.run(kind, *args, caches=caches.geometry) for kind in (TRACED_ZERO, TRACED_ONE))
    agreement, = peer_agreement([one.outputs], oracle, model, runner)
    if not agreement.ok:
        raise RvvError(f"{model.name} on {runner.target.name}: {runner.describe()} disagrees with onnxruntime in "
                       f"the traced run\n{agreement.report()}")
    assert zero.counts is not None and one.counts is not None
    return kept_total(one.counts, runs.store).less(kept_total(zero.counts, runs.store)), caches.l1d.line


def peer_wall(thread_cycles: list[float], traffic: Totals, line: int) -> DispatchWall:
    """The peer's call as one region of work on CORE (measure/walltime.py's equations, no workgroups: each thread's
    share of the traffic is its share of the cycles; no runtime cost per workgroup or dispatch is known for it)."""
    core = CORES[CORE]
    assert core.ghz is not None
    return dispatch_wall({t: (c, 0) for t, c in enumerate(thread_cycles)}, traffic, line, memory_timings(CORE),
                         core.ghz, 0.0, 0.0)


def _core(cell: Cell) -> Core | None:
    """CORE among the cell's target's cores, with a clock; None where it is not one."""
    core = next((c for c in cell.target.cores() if c.name == CORE), None)
    return core if core is not None and core.ghz else None


def iree_threads_ms(cell: Cell, workdir: Path, threads: int, called: set[str]) -> float | None:
    """IREE's est. ms per call on CORE with ``threads`` workers: each dispatch in ``called`` (the dispatches a call
    runs, measure_iree's; the module load's own left out) with its workgroups dealt evenly to the workers, as a
    board's workers woken together take them (``ThreadProfile.even_cycles``; how QEMU's run split them depends on how
    the host schedules the guest's threads), from the cell's run at that many threads (kept by content; the kernel
    suite's wall-time rows make the same run). None where CORE is not one of the target's cores or llvm-mca is
    missing."""
    core = _core(cell)
    if core is None:
        return None
    try:
        profile = measure_threads(cell, workdir / f"threads-{threads}", threads, cores=(core,))
    except (ToolMissing, ConfigError):  # llvm-mca missing; a part with fewer harts than ``threads``
        return None
    return cycles_ms(sum(profile.even_cycles(name, CORE) for name in profile.dispatches if name in called),
                     core.ghz)


def iree_walls(cell: Cell, workdir: Path, thread_counts: list[int], called: set[str]
               ) -> dict[int, tuple[float, str]]:
    """IREE's est. wall ms per call on CORE at each of ``thread_counts`` workers and what bounds it:
    measure/walltime.py over the dispatches in ``called`` (the module load's own left out), from the runs the kernel
    suite's wall-time rows make (kept by content; the traced run read once for all). Empty where CORE is not one of
    the target's cores, or llvm-mca or the traffic is missing; a thread count that cannot be estimated is left out."""
    core = _core(cell)
    if core is None:
        return {}
    try:
        traffic = measure_traffic(cell, workdir / "traffic", core.name)
    except (ToolMissing, ConfigError, RvvError):
        return {}
    found = {}
    for threads in thread_counts:
        try:
            estimate = estimate_cell(cell, workdir / f"wall-{threads}", core, threads, traffic)
        except (ToolMissing, ConfigError, RvvError):
            continue
        call = replace(estimate, dispatches={k: d for k, d in estimate.dispatches.items() if k in called})
        found[threads] = (1e3 * call.seconds, call.bound_by)
    return found


def threads_beside(cell: Cell, model: Model, oracle: Oracle, runner: EmulatedPeerRunner, runs: PeerRuns,
                   workdir: Path, threads: int, called: set[str], one_thread_cycles: float | None = None
                   ) -> ThreadsBeside:
    """The peer and IREE's cell at ``threads`` threads: the busiest threads' in-core est. ms, and both sides' est. wall
    time at one thread (the peer's from ``one_thread_cycles``, its one-thread call's est. cycles) and at ``threads``,
    with the peer's traffic traced through CORE's caches."""
    peer = measure_peer_threads(model, oracle, runner, runs, threads)
    in_core = iree_threads_ms(cell, workdir, threads, called)
    if not peer.thread_cycles:  # llvm-mca missing: no cycles to add stalls to
        return ThreadsBeside(threads, in_core, peer)
    with runs.stages.time("traffic"):
        traffic, line = peer_traffic(model, oracle, runner, runs)
    cycles_at = ({1: [one_thread_cycles]} if one_thread_cycles else {}) | {threads: list(peer.thread_cycles)}
    iree = iree_walls(cell, workdir, list(cycles_at), called)
    walls = []
    for n, cycles in cycles_at.items():
        mine = peer_wall(cycles, traffic, line)
        ms, bound = iree.get(n, (None, None))
        walls.append(WallBeside(n, ms, bound, 1e3 * mine.seconds, mine.bound_by))
    return ThreadsBeside(threads, in_core, peer, tuple(walls), traffic.dram_bytes(line))
