"""Performance measurement of one model on one target: run side (when it can run) and compile side."""

from __future__ import annotations

import re
import statistics
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from elftools.elf.elffile import ELFFile

from pytest_rvv.analyze.static import analyze
from pytest_rvv.cbuild import build_c
from pytest_rvv.compare.agreement import compare
from pytest_rvv.errors import ToolMissing
from pytest_rvv.model.model import Model
from pytest_rvv.profile.measure import measure_executed
from pytest_rvv.run.runner import Runner
from pytest_rvv.session import RvvSession
from pytest_rvv.targets import HOST, Target

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

    def as_json(self) -> dict[str, Any]:
        return {"model": self.model, "target": self.target, "toolchain": self.toolchain, "metrics": self.metrics,
                "samples": self.samples}


def dispatch_code_bytes(executables: tuple[Path, ...]) -> int:
    total = 0
    for elf in executables:
        with elf.open("rb") as f:
            text = ELFFile(f).get_section_by_name(".text")
            total += text.data_size if text is not None else 0
    return total


def measure_performance(session: RvvSession, model: Model, target: Target, runner: Runner | None,
                        repeat: int) -> PerfResult:
    """Compile-side metrics always; run-side metrics when ``runner`` is given.

    Every timed run's outputs must agree with onnxruntime: numbers of a wrong result are not recorded.
    """
    artifact = session.artifact(model, target)
    toolchain = {"iree_compile": session.toolchain.compiler_version,
                 "runtime": runner.runtime.identity if runner else "none",
                 "qemu": f"{runner.qemu.path.name} {runner.qemu.version_text}" if runner and runner.qemu else "none"}
    result = PerfResult(model.name, target.name, toolchain)
    result.metrics.update(compile_s=round(artifact.compile_s, 3), module_bytes=artifact.size_bytes,
                          dispatch_code_bytes=dispatch_code_bytes(artifact.executables))
    if target.arch != HOST:
        total = analyze(artifact).total
        result.metrics.update(static_instructions=total.instructions, static_vector=total.vector)
    if runner is None:
        result.notes.append("run-side metrics need a runtime for this target")
        return result
    with tempfile.TemporaryDirectory(prefix="pytest-rvv-perf-") as tmp:
        work = Path(tmp)
        probe = build_c(session.store, "pytest_rvv.perf", ("rss_probe.c",), "rss_probe", shared=False)
        reference = session.reference(model)
        walls, cpus, rss = [], [], []
        for i in range(repeat):
            rss_file = work / f"rss_{i}.txt"
            outcome = runner.run(artifact, reference.inputs, work / "run", len(reference.outputs),
                                 session.settings.timeout_s, launcher=(str(probe), str(rss_file)),
                                 runtime_args=("--print_statistics",))
            agreement = compare(outcome.outputs, reference.outputs, model.tolerance)
            assert agreement.ok, (  # every timed run must be right: numbers of a wrong result are refused
                f"{model.name} on {target.name} disagrees with onnxruntime\n{agreement.report()}\n"
                f"repro: {outcome.repro}"
            )
            walls.append(round(outcome.process.wall_s, 4))
            cpus.append(round(outcome.process.cpu_s, 4))
            rss.append(int(rss_file.read_text()))
            peaks = dict(_STATISTICS.findall(outcome.process.stdout + outcome.process.stderr))
        result.samples.update(wall_s=walls, cpu_s=cpus)
        result.metrics.update(wall_s_min=min(walls), wall_s_median=statistics.median(walls),
                              cpu_s_min=min(cpus), cpu_s_median=statistics.median(cpus), peak_rss_kb=max(rss))
        if peaks:
            result.metrics["iree_peak_bytes"] = sum(int(v) for v in peaks.values())
        if runner.qemu is not None:
            try:
                executed = measure_executed(session, model, runner, work / "executed")
                totals = executed.attribution["dispatch_totals"]
                result.metrics.update(executed_dispatch_instructions=totals["instructions"],
                                      executed_dispatch_vector=totals["vector"])
            except ToolMissing as exc:
                result.notes.append(f"no executed counts: {exc}")
    return result
