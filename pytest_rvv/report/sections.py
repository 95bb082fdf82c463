"""What every report of a run is handed: the collectors' sections, assembled once at the session's end.

plugin.py builds one ``Sections`` on the controller from the collectors it registered, after the recorder
wrote any baselines, and hands it to the terminal summary (report/terminal.py), performance.md and its plots
(report/performance.py), the HTML page and results.json (report/html.py, report/results.py). No report looks
another collector up: a new section is a field here, filled in plugin.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_rvv.comparison.kernels import KernelChange
from pytest_rvv.comparison.record import ComparisonRecord
from pytest_rvv.judge.vectorization import Records
from pytest_rvv.measure.peers import PeerRow
from pytest_rvv.measure.performance import PerfResult
from pytest_rvv.report.kernels import KernelEntry

Cell = tuple[str, str]  # (model, or "conformance" / an estimator row, target)


@dataclass(frozen=True)
class Sections:
    """One run's report sections, each empty when its tests did not run."""

    tests: list[dict[str, Any]] = field(default_factory=list)  # per test: nodeid, outcome, model, target, check, ...
    performance: dict[Cell, PerfResult] = field(default_factory=dict)  # Table 1: the measured record per cell
    verdicts: dict[Cell, list[Any]] = field(default_factory=dict)  # (metric, baseline, now, verdict) judged per cell
    notes: dict[str, list[str]] = field(default_factory=dict)  # performance notes, grouped by their generic form
    improvements: list[str] = field(default_factory=list)  # passing improvements (--rvv-strict-baselines fails)
    pairs: list[tuple[str, str]] = field(default_factory=list)  # (default, microkernel) target pairs
    kernels: list[KernelEntry] = field(default_factory=list)  # the kernel dashboard (report/kernels.py)
    kernel_cells: int = 0  # the kernel suite's selected cells
    estimator: list[dict[str, Any]] = field(default_factory=list)  # the estimator against published timings
    vectorization: Records = field(default_factory=dict)  # (model, target, kind) -> the gate's record
    unused_snapshots: list[Path] = field(default_factory=list)  # snapshots of unregistered models or targets
    lanes: dict[Cell, dict[str, Any]] = field(default_factory=dict)  # lane occupancy of report runs per cell
    agreement: dict[Cell, float] = field(default_factory=dict)  # max abs error against onnxruntime per cell
    comparisons: list[ComparisonRecord] = field(default_factory=list)  # toolchain comparisons (--rvv-compare)
    kernel_changes: list[KernelChange] = field(default_factory=list)  # the kernel dashboard, before -> after
    baselines: list[str] = field(default_factory=list)  # what the recorder wrote (--update-baselines), per file
    peers: list[PeerRow] = field(default_factory=list)  # cells beside their peer (--rvv-peers; report/peers.py)


@dataclass(frozen=True)
class Written:
    """What ``--rvv-report`` wrote: the folder, Table 1's files and plots, and the page's size and time."""

    directory: Path
    files: list[Path] = field(default_factory=list)  # performance.json, performance.md, the PNG plots
    page: tuple[int, float] | None = None  # bytes of index.html, seconds to write it and results.json
