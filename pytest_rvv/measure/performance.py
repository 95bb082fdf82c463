"""Performance measurement of one model on one target: run side (when it can run) and compile side."""

from __future__ import annotations

import re
import statistics
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from elftools.elf.elffile import ELFFile

from pytest_rvv.base.errors import ToolMissing
from pytest_rvv.config.cores import Core
from pytest_rvv.config.targets import HOST
from pytest_rvv.measure.agreement import compare
from pytest_rvv.measure.executed import ExecutedMeasurement, measure_executed, measure_one_time
from pytest_rvv.measure.metrics import silicon_metric
from pytest_rvv.measure.silicon import SiliconEstimate, estimate_once
from pytest_rvv.measure.static import analyze
from pytest_rvv.run.recorded import PLAIN, rss_probe
from pytest_rvv.session import Cell

_STATISTICS = re.compile(r"(HOST_LOCAL|DEVICE_LOCAL):\s+(\d+)B peak")


@dataclass
class PerfResult:
    """Metrics (compared against baselines), raw time samples, and notes on what was not measured."""

    model: str
    target: str
    toolchain: dict[str, str] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)
    samples: dict[str, list[float]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    executed: dict[str, Any] | None = None  # executed counts per dispatch (emulated targets), not in as_json
    silicon: dict[str, dict[str, int]] = field(default_factory=dict)  # core -> estimated cycles per dispatch
    watched: dict[str, dict[str, int]] = field(default_factory=dict)  # dispatch -> vsetvl/vrgather executed
    one_time: dict[str, int] = field(default_factory=dict)  # dispatch -> instructions it executes at module load
    silicon_one_time: dict[str, int] = field(default_factory=dict)  # core -> estimated cycles of the module load

    board: dict[str, Any] | None = None  # the board (as a machine) the run-side metrics come from
    calibration: dict[str, Any] | None = None  # that machine's core: its estimate beside the measured time

    def as_json(self) -> dict[str, Any]:
        record = {"model": self.model, "target": self.target, "toolchain": self.toolchain, "metrics": self.metrics,
                  "samples": self.samples}
        return (record | ({"silicon": self.silicon} if self.silicon else {})
                | ({"board": self.board} if self.board else {}) | ({"watched": self.watched} if self.watched else {})
                | ({"one_time": self.one_time, "silicon_one_time": self.silicon_one_time} if self.one_time else {})
                | ({"calibration": self.calibration} if self.calibration else {}))


def per_call_cycles(record: dict[str, Any], core: str) -> float | None:
    """Estimated cycles of one call on ``core`` from a record (``PerfResult.as_json``): the run's, less what loading
    the module does once."""
    total = record.get("metrics", {}).get(silicon_metric(core))
    return None if total is None else total - record.get("silicon_one_time", {}).get(core, 0)


def calibration_point(result: PerfResult, core: Core, estimated_cycles: float | None) -> dict[str, Any] | None:
    """A run on silicon beside the estimate for its core: estimated and measured seconds (the fastest run) and
    estimate / measured, or None without both."""
    measured = result.metrics.get("wall_s_min")
    if not estimated_cycles or not measured or not core.ghz:
        return None
    estimated = estimated_cycles / (core.ghz * 1e9)
    return {"core": core.name, "estimated_s": estimated, "measured_s": measured, "ratio": estimated / measured}


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
    result.metrics.update(compile_s=round(artifact.compile_s, 3), module_bytes=artifact.size_bytes,
                          dispatch_code_bytes=dispatch_code_bytes(artifact.executables))
    if target.arch != HOST:
        total = analyze(artifact, cell.store, cell.stages).total
        result.metrics.update(static_instructions=total.instructions, static_vector=total.vector)
    return result


class TimedRuns:
    """Timed runs of one model on one runner, taken one at a time (so two toolchains can interleave).

    Every timed run's outputs must agree with onnxruntime: numbers of a wrong result are refused.
    """

    def __init__(self, cell: Cell, work: Path) -> None:
        self.cell, self.work = cell, work
        self.runner, self.oracle = cell.given()
        self.probe = rss_probe(cell.store)
        self.walls: list[float] = []
        self.cpus: list[float] = []
        self.rss: list[int] = []
        self.peaks: dict[str, str] = {}
        self.measured: dict[str, list[float]] = {}

    def once(self) -> None:
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
        """Count one run (fresh, or the recorded plain run) once its outputs agree with onnxruntime."""
        oracle, model = self.oracle, self.cell.model
        agreement = compare(outputs, oracle.outputs, model.tolerance, oracle.steps)
        assert agreement.ok, (  # every timed run must be right: numbers of a wrong result are refused
            f"{model.name} on {self.runner.target.name} disagrees with onnxruntime "
            f"({self.cell.toolchain.compiler_version})\n{agreement.report()}\nrepro: {repro}"
        )
        self.walls.append(round(wall_s, 4))
        self.cpus.append(round(cpu_s, 4))
        if rss_kb is not None:
            self.rss.append(rss_kb)
        for name, value in (measured or {}).items():  # a board's own peak RSS and hardware counters
            self.measured.setdefault(name, []).append(value)
        self.peaks = dict(_STATISTICS.findall(output))

    def into(self, result: PerfResult) -> None:
        """Add the run-side metrics of the runs so far, and the executed counts (emulated targets)."""
        walls, cpus = self.walls, self.cpus
        result.samples.update(wall_s=walls, cpu_s=cpus)
        result.metrics.update(wall_s_min=min(walls), wall_s_median=statistics.median(walls),
                              cpu_s_min=min(cpus), cpu_s_median=statistics.median(cpus))
        if self.rss:
            result.metrics["peak_rss_kb"] = max(self.rss)
        for name, values in self.measured.items():
            result.metrics[name] = max(values) if name.endswith("peak_rss_kb") else min(values)
        if self.peaks:
            result.metrics["iree_peak_bytes"] = sum(int(v) for v in self.peaks.values())
        if self.runner.capabilities.counted:
            add_executed(self.cell, result)


def add_executed(cell: Cell, result: PerfResult) -> None:
    """Executed counts (the counted run, recorded by content) and the silicon estimates made from them."""
    with tempfile.TemporaryDirectory(prefix="pytest-rvv-executed-") as tmp:
        try:
            executed = measure_executed(cell, Path(tmp))
        except ToolMissing as exc:
            result.notes.append(f"no executed counts: {exc}")
            return
        loaded = measure_one_time(cell, Path(tmp) / "load")
    one_time = loaded.per_dispatch
    totals = executed.attribution["dispatch_totals"]
    result.metrics.update(executed_dispatch_instructions=totals["instructions"],
                          executed_dispatch_vector=totals["vector"],
                          executed_one_time_instructions=sum(one_time.values()),
                          executed_per_call_instructions=totals["instructions"] - sum(one_time.values()))
    result.one_time = one_time
    result.executed = executed.snapshot(cell.model.name, cell.target.name)
    result.watched = executed.attribution.get("watched", {})
    for name, found in _estimates(cell, executed, result.notes).items():
        result.metrics[silicon_metric(name)] = found.total
        result.silicon[name] = found.dispatches
        result.toolchain["llvm_mca"] = found.llvm_mca
    if one_time:  # the per-call estimate is the run's less the load's (the same blocks, estimated once)
        result.silicon_one_time = {name: found.total for name, found in _estimates(cell, loaded, []).items()}


def _estimates(cell: Cell, executed: ExecutedMeasurement, notes: list[str]) -> dict[str, SiliconEstimate]:
    """Estimated silicon cycles on the target's cores (llvm-mca); none, and a note, without llvm-mca."""
    target, artifact = cell.target, cell.artifact
    if not target.cores():
        return {}
    try:
        assert executed.run.counts is not None
        with cell.stages.time("estimate"):
            return estimate_once(executed.counts, executed.run.counts, artifact.executables, target.arch,
                                 target.cores(), cell.store)
    except ToolMissing as exc:
        notes.append(f"no silicon estimates: {exc}")
        return {}


def measure_performance(cell: Cell, repeat: int, timed: bool = True) -> PerfResult:
    """Compile-side metrics always; run-side metrics when the cell has a runner.

    ``timed``: time is gated here (this machine has a baseline, or baselines are being recorded) or was
    asked for: ``repeat`` fresh timed runs. Otherwise an emulated target's run side comes from its plain
    run, recorded by content and shared with the agreement check (one emulated run, none on a rerun),
    and its time is that run's, shown as information.
    """
    result = compile_side(cell)
    if cell.runner is None:
        result.notes.append("run-side metrics need a runtime for this target")
        return result
    recorded = None if timed else cell.recorded(PLAIN)
    with tempfile.TemporaryDirectory(prefix="pytest-rvv-perf-") as tmp:
        runs = TimedRuns(cell, Path(tmp))
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
