"""Performance measurement of one model on one target: run side (when it can run) and compile side."""

from __future__ import annotations

import re
import statistics
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from elftools.elf.elffile import ELFFile

from pytest_rvv.base.errors import ConfigError, RvvError, ToolMissing
from pytest_rvv.config.cores import Core, WallRequest, cycles_s
from pytest_rvv.config.targets import HOST
from pytest_rvv.measure.agreement import CheckedRun, compare
from pytest_rvv.measure.caveats import model_caveats
from pytest_rvv.measure.dispatch_table import CountsSnapshot
from pytest_rvv.measure.executed import ExecutedMeasurement, measure_executed, measure_one_time
from pytest_rvv.measure.metrics import (
    COMPILE_S,
    CPU_S,
    CPU_S_MEDIAN,
    CPU_S_MIN,
    DISPATCH_CODE_BYTES,
    EXECUTED_DISPATCH_INSTRUCTIONS,
    EXECUTED_DISPATCH_VECTOR,
    EXECUTED_ONE_TIME_INSTRUCTIONS,
    EXECUTED_PER_CALL_INSTRUCTIONS,
    IREE_PEAK_BYTES,
    MODULE_BYTES,
    PEAK_RSS_KB,
    STATIC_INSTRUCTIONS,
    STATIC_VECTOR,
    WALL_S,
    WALL_S_MEDIAN,
    WALL_S_MIN,
    silicon_metric,
)
from pytest_rvv.measure.silicon import SiliconEstimate, estimate_once
from pytest_rvv.measure.static import analyze
from pytest_rvv.measure.traffic import measure_traffic
from pytest_rvv.measure.walltime import estimate_cell
from pytest_rvv.run.recorded import PLAIN, rss_probe
from pytest_rvv.session import Cell

_STATISTICS = re.compile(r"(HOST_LOCAL|DEVICE_LOCAL):\s+(\d+)B peak")


@dataclass(frozen=True)
class CalibrationPoint:
    """A run on silicon beside the estimates for its core: the in-core estimate (llvm-mca, one thread, every load an
    L1 hit) and measured seconds, estimate / measured; and, when it could be measured, the estimated wall time at the
    run's threads (measure/walltime.py on an emulated twin of the cell), what bounds it, and wall / measured."""

    core: str
    estimated_s: float
    measured_s: float
    ratio: float
    threads: int = 1  # threads the silicon run used (a bundle's runs: local-sync, 1)
    wall_s: float | None = None  # the estimated wall time at ``threads``; None when it could not be estimated
    bound_by: str | None = None  # what bounds it: compute, L2, DRAM or imbalance

    @property
    def error_percent(self) -> float:
        """The in-core estimate's error against the measured time, in percent (negative: it estimates too fast)."""
        return 100 * (self.estimated_s / self.measured_s - 1)

    @property
    def wall_error_percent(self) -> float | None:
        return None if self.wall_s is None else 100 * (self.wall_s / self.measured_s - 1)

    def to_json(self) -> dict[str, Any]:
        record = {"core": self.core, "estimated_s": self.estimated_s, "measured_s": self.measured_s,
                  "ratio": self.ratio, "threads": self.threads, "error_percent": round(self.error_percent, 1)}
        if self.wall_s is not None:
            record |= {"wall_s": self.wall_s, "bound_by": self.bound_by,
                       "wall_ratio": self.wall_s / self.measured_s,
                       "wall_error_percent": round(self.wall_error_percent or 0.0, 1)}
        return record

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CalibrationPoint:
        return cls(data["core"], data["estimated_s"], data["measured_s"], data["ratio"], data.get("threads", 1),
                   data.get("wall_s"), data.get("bound_by"))


@dataclass
class PerfResult:
    """Metrics (compared against baselines), raw time samples, and notes on what was not measured.

    ``to_json`` / ``from_json`` are its one (de)serialiser: the record a test leaves for the reports (it crosses
    xdist), ``performance.json`` and what ``results.json`` is made from. ``notes``, ``executed`` and ``disagreement``
    stay with the test.
    """

    model: str
    target: str
    toolchain: dict[str, str] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)
    samples: dict[str, list[float]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    executed: CountsSnapshot | None = None  # executed counts per dispatch (emulated targets), not in to_json
    silicon: dict[str, dict[str, int]] = field(default_factory=dict)  # core -> estimated cycles per dispatch
    watched: dict[str, dict[str, int]] = field(default_factory=dict)  # dispatch -> vsetvl/vrgather executed
    one_time: dict[str, int] = field(default_factory=dict)  # dispatch -> instructions it executes at module load
    silicon_one_time: dict[str, int] = field(default_factory=dict)  # core -> estimated cycles of the module load
    # core -> dispatch -> memory traffic on its modelled caches (TRAFFIC_FIGURES; the kernel suite's cells)
    traffic: dict[str, dict[str, dict[str, int]]] = field(default_factory=dict)
    # core -> threads -> the estimated wall time of one call (WALL_FIGURES; the kernel suite's cells)
    wall: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    # core -> the instructions LLVM's model of it is known to get wrong that the estimated code executes
    # (measure/caveats.py: instruction, SEWs, executed, dispatches, share of the estimate, reason)
    caveats: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    board: dict[str, Any] | None = None  # the board (as a machine) the run-side metrics come from
    calibration: CalibrationPoint | None = None  # that machine's core: its estimate beside the measured time
    # a run whose outputs disagree with onnxruntime (its numbers are not taken; judge/ refuses it), not in to_json
    disagreement: CheckedRun | None = None

    def to_json(self) -> dict[str, Any]:
        record = {"model": self.model, "target": self.target, "toolchain": self.toolchain, "metrics": self.metrics,
                  "samples": self.samples}
        return (record | ({"silicon": self.silicon} if self.silicon else {})
                | ({"board": self.board} if self.board else {}) | ({"watched": self.watched} if self.watched else {})
                | ({"one_time": self.one_time, "silicon_one_time": self.silicon_one_time} if self.one_time else {})
                | ({"calibration": self.calibration.to_json()} if self.calibration else {})
                | ({"traffic": self.traffic} if self.traffic else {}) | ({"wall": self.wall} if self.wall else {})
                | ({"caveats": self.caveats} if self.caveats else {}))

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> PerfResult:
        """The result ``to_json`` wrote (fields it leaves out when empty come back empty)."""
        calibration = data.get("calibration")
        return cls(data["model"], data["target"], data["toolchain"], data["metrics"], data["samples"],
                   silicon=data.get("silicon", {}), watched=data.get("watched", {}), one_time=data.get("one_time", {}),
                   silicon_one_time=data.get("silicon_one_time", {}), board=data.get("board"),
                   traffic=data.get("traffic", {}), wall=data.get("wall", {}), caveats=data.get("caveats", {}),
                   calibration=CalibrationPoint.from_json(calibration) if calibration else None)

    @property
    def board_name(self) -> str | None:
        """The board the run-side metrics come from; None for this machine's runs."""
        return self.board.get("name") if self.board else None

    def per_call_traffic(self, core: str) -> dict[str, int] | None:
        """Memory traffic of one call on ``core``'s caches: the dispatches' sum, less those that ran only while the
        module loaded (``at_load``); None when not measured."""
        dispatches = self.traffic.get(core)
        if dispatches is None:
            return None
        called = [d for d in dispatches.values() if not d.get("at_load")]
        return {name: sum(d[name] for d in called) for name in TRAFFIC_FIGURES}

    def dram_per_dispatch(self, core: str) -> dict[str, int]:
        """DRAM bytes of each dispatch one call runs, on ``core``'s modelled caches (those that ran only while the
        module loaded left out); empty when not measured."""
        return {name: int(d["dram_bytes"]) for name, d in self.traffic.get(core, {}).items() if not d.get("at_load")}

    def spilled_registers(self) -> int | None:
        """Vector registers the counted run's spills and reloads moved, over its dispatches (None: no counted run)."""
        if not self.watched:
            return None
        return sum(d.get("spilled_registers", 0) for d in self.watched.values())

    def per_call_cycles(self, core: str) -> float | None:
        """Estimated cycles of one call on ``core``: the run's, less what loading the module does once."""
        total = self.metrics.get(silicon_metric(core))
        return None if total is None else total - self.silicon_one_time.get(core, 0)


def calibration_point(result: PerfResult, core: Core, estimated_cycles: float | None, threads: int = 1,
                      emulated: Cell | None = None) -> CalibrationPoint | None:
    """A run on silicon beside the estimates for its core: the in-core estimate and measured seconds (the fastest
    run), estimate / measured, or None without both; with ``emulated`` (the same target and module on an emulated
    runner) also the estimated wall time at the run's ``threads`` (measure/walltime.py, its runs kept by content), or
    a note on ``result`` saying why not."""
    measured = result.metrics.get(WALL_S_MIN)
    if not estimated_cycles or not measured or not core.ghz:
        return None
    estimated = cycles_s(estimated_cycles, core.ghz)
    point = CalibrationPoint(core.name, estimated, measured, estimated / measured, threads)
    if emulated is None:
        return point
    with tempfile.TemporaryDirectory(prefix="pytest-rvv-calibration-") as tmp:
        try:
            with emulated.stages.time("threads"):
                wall = estimate_cell(emulated, Path(tmp), core, threads)
        except (ToolMissing, RvvError, ValueError, ConfigError) as exc:
            result.notes.append(f"no est. wall time beside the measured run on {core.name}: "
                                f"{str(exc).splitlines()[0]}")
            return point
    return replace(point, wall_s=wall.seconds, bound_by=wall.bound_by)


def dispatch_code_bytes(executables: tuple[Path, ...]) -> int:
    total = 0
    for elf in executables:
        with elf.open("rb") as f:
            text = ELFFile(f).get_section_by_name(".text")
            total += text.data_size if text is not None else 0
    return total


def compile_side(cell: Cell) -> PerfResult:
    """A result holding the compile-side metrics (sizes, static counts, compile time) of the cell's toolchain."""
    model, target, runner, artifact = cell.model, cell.target, cell.runner, cell.artifact
    toolchain = {"iree_compile": cell.toolchain.compiler_version,
                 "runtime": runner.runtime.identity if runner else "none",
                 "qemu": f"{runner.qemu.path.name} {runner.qemu.version_text}" if runner and runner.qemu else "none"}
    result = PerfResult(model.name, target.name, toolchain)
    result.metrics.update({COMPILE_S: round(artifact.compile_s, 3), MODULE_BYTES: artifact.size_bytes,
                           DISPATCH_CODE_BYTES: dispatch_code_bytes(artifact.executables)})
    if target.arch != HOST:
        total = analyze(artifact, cell.store, cell.stages).total
        result.metrics.update({STATIC_INSTRUCTIONS: total.instructions, STATIC_VECTOR: total.vector})
    return result


class TimedRuns:
    """Timed runs of one model on one runner, taken one at a time (so two toolchains can interleave).

    Every timed run's outputs are held against onnxruntime's: after the first that disagrees (``disagreement``) no run
    is taken or counted, and judge/ refuses the numbers.
    """

    def __init__(self, cell: Cell, work: Path, traced_on: str | None = None) -> None:
        self.cell, self.work, self.traced_on = cell, work, traced_on  # traced_on: see add_executed
        self.runner, self.oracle = cell.given()
        self.probe = rss_probe(cell.store)
        self.walls: list[float] = []
        self.cpus: list[float] = []
        self.rss: list[int] = []
        self.peaks: dict[str, str] = {}
        self.measured: dict[str, list[float]] = {}
        self.disagreement: CheckedRun | None = None

    def once(self) -> None:
        if self.disagreement is not None:
            return
        oracle = self.oracle
        rss_file = self.work / f"rss_{len(self.walls)}.txt"
        with self.cell.stages.time("emulate (timed)"):
            outcome = self.runner.run(self.cell.artifact, oracle.inputs, self.work / "run", len(oracle.outputs),
                                      self.cell.timeout_s, launcher=(str(self.probe), str(rss_file)),
                                      runtime_args=("--print_statistics",))
        self.take(outcome.outputs, outcome.process.wall_s, outcome.process.cpu_s,
                  int(rss_file.read_text()) if rss_file.is_file() else None,
                  outcome.process.stdout + outcome.process.stderr, outcome.repro, outcome.measured)

    def take(self, outputs: list, wall_s: float, cpu_s: float, rss_kb: int | None, output: str, repro: str,
             measured: dict[str, float] | None = None) -> None:
        """Count one run (fresh, or the recorded plain run) when its outputs agree with onnxruntime."""
        oracle, model = self.oracle, self.cell.model
        agreement = compare(outputs, oracle.outputs, model.tolerance, oracle.steps)
        if self.disagreement is not None or not agreement.ok:  # numbers of a wrong result are not taken
            self.disagreement = self.disagreement or CheckedRun(
                model.name, self.runner.target.name, agreement, f" ({self.cell.toolchain.compiler_version})", repro)
            return
        self.walls.append(round(wall_s, 4))
        self.cpus.append(round(cpu_s, 4))
        if rss_kb is not None:
            self.rss.append(rss_kb)
        for name, value in (measured or {}).items():  # a board's own peak RSS and hardware counters
            self.measured.setdefault(name, []).append(value)
        self.peaks = dict(_STATISTICS.findall(output))

    def into(self, result: PerfResult) -> None:
        """Add the run-side metrics of the runs so far, and the executed counts (emulated targets); only the
        disagreement when a run disagreed."""
        if self.disagreement is not None:
            result.disagreement = self.disagreement
            return
        walls, cpus = self.walls, self.cpus
        result.samples.update({WALL_S: walls, CPU_S: cpus})
        result.metrics.update({WALL_S_MIN: min(walls), WALL_S_MEDIAN: statistics.median(walls),
                               CPU_S_MIN: min(cpus), CPU_S_MEDIAN: statistics.median(cpus)})
        if self.rss:
            result.metrics[PEAK_RSS_KB] = max(self.rss)
        for name, values in self.measured.items():
            result.metrics[name] = max(values) if name.endswith(PEAK_RSS_KB) else min(values)
        if self.peaks:
            result.metrics[IREE_PEAK_BYTES] = sum(int(v) for v in self.peaks.values())
        if self.runner.capabilities.counted:
            add_executed(self.cell, result, self.traced_on)


def add_executed(cell: Cell, result: PerfResult, traced_on: str | None = None) -> None:
    """Executed counts (the counted run, recorded by content) and the silicon estimates made from them; only the
    disagreement when the counted run disagreed with onnxruntime. ``traced_on``: the core ``add_traffic`` will
    trace this cell on (one emulation then counts and traces)."""
    with tempfile.TemporaryDirectory(prefix="pytest-rvv-executed-") as tmp:
        try:
            executed = measure_executed(cell, Path(tmp), traced_on=traced_on)
        except ToolMissing as exc:
            result.notes.append(f"no executed counts: {exc}")
            return
        if executed.checked is not None and not executed.checked.agreement.ok:
            result.disagreement = executed.checked
            return
        loaded = measure_one_time(cell, Path(tmp) / "load")
    one_time = loaded.per_dispatch
    totals = executed.attribution.totals
    result.metrics.update({EXECUTED_DISPATCH_INSTRUCTIONS: totals.instructions,
                           EXECUTED_DISPATCH_VECTOR: totals.vector,
                           EXECUTED_ONE_TIME_INSTRUCTIONS: sum(one_time.values()),
                           EXECUTED_PER_CALL_INSTRUCTIONS: sum(work for work, _ in executed.per_call(loaded).values())})
    result.one_time = one_time
    result.executed = executed.counted
    result.watched = {name: dict(watched) for name, watched in executed.attribution.watched.items()}
    for name, found in _estimates(cell, executed, result.notes).items():
        result.metrics[silicon_metric(name)] = found.total
        result.silicon[name] = found.dispatches
        result.toolchain["llvm_mca"] = found.llvm_mca
    if result.silicon and executed.run.counts is not None:  # an estimate resting on a known error of LLVM's model
        totals = {name: sum(dispatches.values()) for name, dispatches in result.silicon.items()}
        with cell.stages.time("estimate"):
            result.caveats = model_caveats(executed.parsed, executed.run.counts, cell.artifact.executables,
                                           cell.target.arch, cell.target.cores(), totals, cell.store)
    if one_time:  # the per-call estimate is the run's less the load's (the same blocks, estimated once)
        result.silicon_one_time = {name: found.total for name, found in _estimates(cell, loaded, []).items()}


TRAFFIC_FIGURES = ("bytes_loaded", "bytes_stored", "l1_misses", "l2_misses", "dram_bytes")


def add_traffic(cell: Cell, result: PerfResult, wall: WallRequest) -> None:
    """Memory traffic per dispatch on ``wall``'s core's modelled caches (measure/traffic.py: one traced run, kept in
    the store by content), each dispatch marked ``at_load`` when it ran only while the module loaded (its executed
    count is all one-time work), and the call's estimated wall time at each of ``wall``'s thread counts
    (measure/walltime.py: one local-task run per thread count above one, the counted run at one, kept by content):
    seconds and what bounds it. A note instead of what cannot be measured."""
    if result.disagreement is not None or cell.runner is None or not cell.runner.capabilities.counted:
        return
    core = wall.core.name
    with tempfile.TemporaryDirectory(prefix="pytest-rvv-traffic-") as tmp:
        try:
            with cell.stages.time("traffic"):
                traffic = measure_traffic(cell, Path(tmp), core)
        except (ToolMissing, RvvError) as exc:
            result.notes.append(f"no memory traffic on {core}: {str(exc).splitlines()[0]}")
            return
        for threads in wall.threads:
            try:
                with cell.stages.time("threads"):
                    estimate = estimate_cell(cell, Path(tmp), wall.core, threads, traffic)
            except (ToolMissing, RvvError, ValueError, ConfigError) as exc:
                result.notes.append(f"no est. wall time at {threads} threads on {core}: {str(exc).splitlines()[0]}")
                continue
            result.wall.setdefault(core, {})[str(threads)] = {"seconds": estimate.seconds,
                                                              "bound_by": estimate.bound_by,
                                                              "latency_hidden_s": estimate.overlapped_seconds}
    executed = result.executed.dispatches if result.executed is not None else {}
    figures = {}
    for name, totals in traffic.dispatches.items():
        load_only = (name in result.one_time and name in executed
                     and executed[name].instructions == result.one_time[name])
        figures[name] = {"bytes_loaded": totals.bytes_loaded, "bytes_stored": totals.bytes_stored,
                         "l1_misses": totals.l1_misses, "l2_misses": totals.l2_misses,
                         "dram_bytes": totals.dram_bytes(traffic.line), "at_load": int(load_only)}
    result.traffic[core] = figures


def _estimates(cell: Cell, executed: ExecutedMeasurement, notes: list[str]) -> dict[str, SiliconEstimate]:
    """Estimated silicon cycles on the target's cores (llvm-mca); none, and a note, without llvm-mca."""
    target, artifact = cell.target, cell.artifact
    if not target.cores():
        return {}
    try:
        assert executed.run.counts is not None
        with cell.stages.time("estimate"):
            return estimate_once(executed.parsed, executed.run.counts, artifact.executables, target.arch,
                                 target.cores(), cell.store)
    except ToolMissing as exc:
        notes.append(f"no silicon estimates: {exc}")
        return {}


def measure_performance(cell: Cell, repeat: int, timed: bool = True, traced_on: str | None = None) -> PerfResult:
    """Compile-side metrics always; run-side metrics when the cell has a runner.

    ``timed``: time is gated here (this machine has a baseline, or baselines are being recorded) or was
    asked for: ``repeat`` fresh timed runs. Otherwise an emulated target's run side comes from its plain
    run, recorded by content and shared with the agreement check (one emulated run, none on a rerun),
    and its time is that run's, shown as information. ``traced_on``: the core ``add_traffic`` will trace it on.
    """
    result = compile_side(cell)
    if cell.runner is None:
        result.notes.append("run-side metrics need a runtime for this target")
        return result
    recorded = None if timed else cell.recorded(PLAIN)
    with tempfile.TemporaryDirectory(prefix="pytest-rvv-perf-") as tmp:
        runs = TimedRuns(cell, Path(tmp), traced_on)
        if cell.runner.capabilities.replays:  # e.g. a RISC-V machine's rounds of a bundle: each is one timed run
            oracle = cell.given()[1]
            for outcome in cell.runner.replay(cell.artifact, oracle.inputs, len(oracle.outputs)):
                runs.take(outcome.outputs, outcome.process.wall_s, outcome.process.cpu_s, None,
                          outcome.process.stdout + outcome.process.stderr, outcome.repro, outcome.measured)
        elif recorded is None:
            for _ in range(repeat):
                runs.once()
        else:
            runs.take(recorded.outputs, recorded.wall_s, recorded.cpu_s, recorded.rss_kb, recorded.stdout,
                      recorded.repro)
            result.notes.append("time of one recorded run" + (" (from the cache)" if recorded.cached else "")
                                + ": not gated here (no baseline of this machine); --rvv-perf-repeat=N times fresh "
                                  "runs")
        runs.into(result)
    return result
