"""One estimated wall time per dispatch and per call, at 1 and N threads: in-core cycles per thread (llvm-mca, from
measure/threads.py), stalls on L1 misses that hit L2 and on those that go to DRAM (measure/traffic.py's cache model),
the bandwidth the threads share, and the thread critical path, with what bounds each named.

The model, per dispatch ``d`` with ``W`` workgroups on ``N`` workers, thread ``t`` taking ``w_t`` of them:

- ``share_t = w_t / W``: a thread's share of the dispatch's traffic. Traffic is measured in a one-thread run, so a
  dispatch's L1 misses, L2 misses and DRAM bytes are apportioned to its threads by their share of its workgroups.
- ``compute_t = mca_t + cpi * per_workgroup * w_t``: llvm-mca's cycles of the dispatch code thread ``t`` ran, plus
  the runtime's measured instructions around each workgroup (``RuntimeCost``) at ``cpi`` cycles each.
- ``l2_t = share_t * (L1 misses - L2 misses) * L2 latency / MLP``: stalls on L1 misses that hit L2.
- ``dram_t = share_t * L2 misses * DRAM latency / MLP``: stalls on lines read from DRAM.
- ``T_t = compute_t + l2_t + dram_t`` (an in-order core: stalls add to its work).
- floors set by bandwidth the threads share: ``DRAM = DRAM bytes / (sustained bandwidth per cycle)`` (one channel for
  every core, whichever threads move the bytes), ``L2 = max over clusters of (its threads' shares x L1 misses x line)
  / (L2 bytes per cycle)`` (one L2 per cluster of ``cluster`` cores; workers fill cluster 0 first, then 1).
- ``T_d = fixed + max(max_t T_t, DRAM floor, L2 floor)``, ``fixed = cpi * per_worker_per_dispatch`` (the runtime's
  measured work per dispatch and worker: waking, looking for work, retiring the region; 0 at one thread).
- the call: ``sum_d T_d`` (dispatches one after another, as the command buffer's barriers order them).

What bounds a dispatch (``bound_by``), exactly:

- ``DRAM``: the DRAM floor sets ``T_d`` (it exceeds every thread's time and the L2 floor), or else stalls on DRAM
  latency are the largest of the four parts below;
- ``L2``: the L2 floor sets ``T_d``, or else stalls on L1 misses that hit L2 are the largest part;
- ``compute``: in-core work (llvm-mca plus the runtime's instructions) is the largest part;
- ``imbalance``: the slowest thread's time less the mean thread's time is the largest part (work idle workers could
  have taken: uneven workgroups, or fewer workgroups than workers).

The four parts, when no floor binds: the mean over the ``N`` workers of ``compute_t`` (plus ``fixed``), of ``l2_t``,
of ``dram_t``, and ``max_t T_t - mean_t T_t``; they sum to ``T_d``. When a floor binds, ``T_d`` is that floor's
part (and ``fixed`` compute's). The call's parts are the sum of its dispatches'; its bound is the largest.

What it is not (read before trusting a figure): miss counts come from one thread with a whole L2 to itself
(local-sync); at 8 threads on two clusters the L2 capacity doubles, so the L2-miss count is an upper bound there
(and with 2-4 threads sharing one L2 a lower one); no prefetcher is modelled (every streaming miss is charged); the
latencies and MLP are assumptions stated in config/cores.py (MEMORY), not measurements.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_rvv.config.cores import Core, MemoryTimings, cycles_s, memory_timings
from pytest_rvv.measure.threads import DispatchThreads, ThreadProfile, measure_threads
from pytest_rvv.measure.traffic import Totals, Traffic, measure_traffic
from pytest_rvv.session import Cell

BOUNDS = ("compute", "L2", "DRAM", "imbalance")
SPLITS = ("measured", "even")  # the workgroups as the emulated run split them, or dealt evenly to the workers


@dataclass(frozen=True)
class DispatchWall:
    """One dispatch's estimated wall time: cycles on the critical path, seconds, what bounds it and the parts
    (``BOUNDS``) its cycles are made of."""

    cycles: float
    seconds: float
    bound_by: str
    parts: dict[str, float]
    slowest: float  # the slowest thread's cycles (compute and stalls), without the per-dispatch cost
    dram_floor: float
    l2_floor: float
    overlapped: float = 0.0  # cycles with every DRAM miss's latency hidden (streams overlapped): the floors still hold

    def as_json(self) -> dict[str, Any]:
        return {"cycles": round(self.cycles), "seconds": self.seconds, "bound_by": self.bound_by,
                "parts": {k: round(v) for k, v in self.parts.items()}, "slowest_thread": round(self.slowest),
                "dram_floor": round(self.dram_floor), "l2_floor": round(self.l2_floor)}


@dataclass(frozen=True)
class WallEstimate:
    """A module call's estimated wall time on ``core`` with ``threads`` workers: per dispatch, and the call."""

    core: str
    threads: int
    split: str
    ghz: float
    dispatches: dict[str, DispatchWall]
    untraced: tuple[str, ...] = ()  # dispatches the traffic run did not see: charged no stalls
    notes: tuple[str, ...] = field(default=())

    @property
    def cycles(self) -> float:
        return sum(d.cycles for d in self.dispatches.values())

    @property
    def seconds(self) -> float:
        return cycles_s(self.cycles, self.ghz)

    @property
    def overlapped_seconds(self) -> float:
        """The call with every DRAM miss's latency hidden behind the work (streams overlapped, as a prefetcher or the
        misses' own parallelism would) and the bandwidth floors kept: the low end of the estimate, whose high end
        (``seconds``) charges every miss its latency."""
        return cycles_s(sum(d.overlapped for d in self.dispatches.values()), self.ghz)

    @property
    def parts(self) -> dict[str, float]:
        return {b: sum(d.parts[b] for d in self.dispatches.values()) for b in BOUNDS}

    @property
    def bound_by(self) -> str:
        """The largest of the call's parts (the sum over its dispatches)."""
        parts = self.parts
        return max(BOUNDS, key=lambda b: parts[b])

    def as_json(self) -> dict[str, Any]:
        return {"core": self.core, "threads": self.threads, "split": self.split, "ghz": self.ghz,
                "cycles": round(self.cycles), "seconds": self.seconds, "bound_by": self.bound_by,
                "parts": {k: round(v) for k, v in self.parts.items()},
                "dispatches": {k: d.as_json() for k, d in self.dispatches.items()},
                "untraced": list(self.untraced), "notes": list(self.notes)}

    def table(self) -> str:
        """One line per dispatch and one for the call: est. cycles, ms, bound by, and the parts."""
        head = f"{'dispatch':<50} {'cycles':>11} {'ms':>8} {'bound by':>9}" + "".join(f" {b:>10}" for b in BOUNDS)
        rows = [head]
        for name, d in [*self.dispatches.items(), ("call", None)]:
            cycles, bound, parts = (d.cycles, d.bound_by, d.parts) if d else (self.cycles, self.bound_by, self.parts)
            rows.append(f"{name[:50]:<50} {cycles:>11.0f} {cycles / self.ghz / 1e6:>8.3f} {bound:>9}"
                        + "".join(f" {parts[b]:>10.0f}" for b in BOUNDS))
        return "\n".join(rows)


def thread_work(d: DispatchThreads, core: str, workers: list[int], split: str) -> dict[int, tuple[float, int]]:
    """Per worker: (llvm-mca cycles, workgroups) of dispatch ``d``, as measured, or with its workgroups (taken as
    equal) dealt evenly to the workers."""
    cycles = d.cycles.get(core, {})
    if split == "measured":
        return {t: (float(cycles.get(t, 0)), d.workgroups.get(t, 0)) for t in workers}
    count, total = d.total_workgroups, float(sum(cycles.values()))
    if not count:
        return {t: (total if i == 0 else 0.0, 0) for i, t in enumerate(workers)}
    dealt = {t: count // len(workers) + (1 if i < count % len(workers) else 0) for i, t in enumerate(workers)}
    return {t: (total * w / count, w) for t, w in dealt.items()}


def dispatch_wall(work: dict[int, tuple[float, int]], traffic: Totals, line: int, memory: MemoryTimings,
                  ghz: float, per_workgroup: float, fixed: float) -> DispatchWall:
    """The model's equations (module docstring) for one dispatch: ``work`` is each worker's (llvm-mca cycles,
    workgroups) in worker order; ``per_workgroup`` and ``fixed`` the runtime's cycles per workgroup and per dispatch
    and worker; ``traffic`` the dispatch's one-thread traffic."""
    count = sum(w for _, w in work.values())
    total_cycles = sum(c for c, _ in work.values())
    l2_hits = max(traffic.l1_misses - traffic.l2_misses, 0)
    dram_latency = memory.dram_latency_ns * ghz  # cycles
    rows = {}
    for t, (cycles, w) in work.items():
        # a thread's share of the traffic: its workgroups' share (its cycles' share where no workgroup was counted)
        share = w / count if count else (cycles / total_cycles if total_cycles else 0.0)
        compute = cycles + per_workgroup * w
        rows[t] = (compute, share * l2_hits * memory.l2_latency / memory.mlp,
                   share * traffic.l2_misses * dram_latency / memory.mlp, share)
    times = {t: c + l2 + dram for t, (c, l2, dram, _) in rows.items()}
    slowest = max(times.values(), default=0.0)
    dram_floor = traffic.dram_bytes(line) / (memory.dram_gbs / ghz)  # bytes / (bytes per cycle)
    clusters: dict[int, float] = {}
    for i, (_, _, _, share) in enumerate(rows.values()):
        clusters[i // memory.cluster] = clusters.get(i // memory.cluster, 0.0) + share
    l2_floor = max(clusters.values(), default=0.0) * traffic.l1_misses * line / memory.l2_bytes_per_cycle
    cycles = fixed + max(slowest, dram_floor, l2_floor)
    overlapped = fixed + max(max((c + l2 for c, l2, _, _ in rows.values()), default=0.0), dram_floor, l2_floor)
    if dram_floor > slowest and dram_floor >= l2_floor:
        parts, bound = {"compute": fixed, "L2": 0.0, "DRAM": dram_floor, "imbalance": 0.0}, "DRAM"
    elif l2_floor > slowest:
        parts, bound = {"compute": fixed, "L2": l2_floor, "DRAM": 0.0, "imbalance": 0.0}, "L2"
    else:
        n = len(rows) or 1
        parts = {"compute": fixed + sum(r[0] for r in rows.values()) / n,
                 "L2": sum(r[1] for r in rows.values()) / n, "DRAM": sum(r[2] for r in rows.values()) / n,
                 "imbalance": slowest - sum(times.values()) / n}
        bound = max(BOUNDS, key=lambda b: parts[b])
    return DispatchWall(cycles, cycles_s(cycles, ghz), bound, parts, slowest, dram_floor, l2_floor, overlapped)


def estimate_wall(profile: ThreadProfile, traffic: Traffic, core: Core, split: str = "even",
                  memory: MemoryTimings | None = None, runtime_cpi: float = 1.0) -> WallEstimate:
    """The estimated wall time of one call of ``profile``'s module on ``core`` at the profile's threads: per
    dispatch and the call, each with what bounds it (module docstring). ``profile`` must carry est. cycles on
    ``core`` (``measure_threads(..., cores=(core,))``) and ``traffic`` come from ``core``'s cache model. ``split``:
    the workgroups per thread as measured under QEMU, or dealt evenly to the workers (what a board's workers, woken
    together, come close to; QEMU on a host with fewer cores than workers lets one worker claim several first)."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {', '.join(SPLITS)}, not {split!r}")
    if core.ghz is None:
        raise ValueError(f"core {core.name} has no clock: give one (e.g. {core.name}@1.6) to estimate seconds")
    if core.name not in profile.cores:
        raise ValueError(f"the thread profile has no est. cycles on {core.name}: measure it with cores=(core,)")
    if traffic.core != core.name:
        raise ValueError(f"the traffic was modelled on {traffic.core}'s caches, not {core.name}'s")
    memory = memory or memory_timings(core.name)
    cost = profile.runtime_cost()
    per_workgroup = runtime_cpi * (cost.per_workgroup or 0.0)
    fixed = runtime_cpi * (cost.per_worker_per_dispatch or 0.0)
    walls, untraced = {}, []
    for name, d in profile.dispatches.items():
        moved = traffic.dispatches.get(name)
        if moved is None:
            untraced.append(name)
            moved = Totals()
        walls[name] = dispatch_wall(thread_work(d, core.name, profile.workers, split), moved, traffic.line, memory,
                                    core.ghz, per_workgroup, fixed)
    notes = ["traffic measured with one thread, apportioned to threads by their share of each dispatch's workgroups"]
    if profile.threads > memory.cluster:
        notes.append(f"{profile.threads} threads span {-(-profile.threads // memory.cluster)} clusters: the L2 "
                     f"capacity grows, so the one-thread L2-miss count is an upper bound")
    elif profile.threads > 1:
        notes.append(f"{profile.threads} threads share one L2: the one-thread L2-miss count is a lower bound")
    return WallEstimate(core.name, profile.threads, split, core.ghz, walls, tuple(untraced), tuple(notes))


def estimate_cell(cell: Cell, workdir: Path, core: Core, threads: int, traffic: Traffic | None = None,
                  split: str = "even") -> WallEstimate:
    """A cell's estimated wall time on ``core`` at ``threads`` workers: one ``local-task`` run with the counter (at
    one thread the cell's counted run) and one traced run through ``core``'s caches (or ``traffic``, when measured
    already), each kept in the store by content, so a second estimate of the same cell runs nothing."""
    profile = measure_threads(cell, workdir / f"threads-{threads}", threads, cores=(core,))
    moved = traffic if traffic is not None else measure_traffic(cell, workdir / "traffic", core.name)
    return estimate_wall(profile, moved, core, split)
