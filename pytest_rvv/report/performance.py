"""Performance reporting: the controller collects results; Table 1 and its companions are formatted here.

Table 1 follows the scalar-vs-RVV study: Model | Target | Time | Mem | static vector instr |
executed vector % | speedup vs rv64gc. ``--rvv-report=DIR`` also writes JSON, Markdown and PNG plots.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from pytest_rvv.base.record import Record
from pytest_rvv.base.store import atomic_write_bytes
from pytest_rvv.config.cores import CORES, Core
from pytest_rvv.config.targets import microkernel_pairs
from pytest_rvv.measure.metrics import SILICON, WALL_S_MIN, silicon_metric
from pytest_rvv.measure.performance import PerfResult
from pytest_rvv.measure.silicon import WHAT_IT_IS
from pytest_rvv.report import kernels
from pytest_rvv.report.estimator import estimator_table
from pytest_rvv.session import RvvSession


def _board(record: PerfResult | None) -> str | None:
    return record.board_name if record is not None else None


def _metric(rows: dict[tuple[str, str], PerfResult], model: str, target: str, metric: str) -> float | None:
    """One metric of one model x target; None when it was not measured."""
    record = rows.get((model, target))
    return record.metrics.get(metric) if record is not None else None


def _speedup(rows: dict[tuple[str, str], PerfResult], model: str, target: str) -> str:
    """Speedup over rv64gc measured the same way (both emulated, or both on the same board), riscv64 only."""
    record = rows.get((model, target))
    base_record = next((r for (m, t), r in rows.items() if m == model and _board(r) == _board(record)
                        and (t == "rv64gc" or t.endswith("-rv64gc"))), None)
    if not (target.startswith("rv64") or _board(record)) or base_record is None:
        return "-"
    base = base_record.metrics.get(WALL_S_MIN)
    now = _metric(rows, model, target, WALL_S_MIN)
    return f"{base / now:.2f}x" if base and now else "-"


def _cores(rows: dict[tuple[str, str], PerfResult]) -> list[Core]:
    """The silicon cores estimated in these rows, in the order of the core table."""
    names = {m.partition("@")[2] for r in rows.values() for m in r.metrics if m.startswith(f"{SILICON}@")}
    order = list(CORES)
    return [CORES[n] if n in CORES else Core(n, 0, n)
            for n in sorted(names, key=lambda n: (order.index(n) if n in CORES else len(order), n))]


def _estimate(rows: dict[tuple[str, str], PerfResult], model: str, target: str, core: Core) -> float | None:
    """Estimated time on ``core`` in ms (cycles / clock), or millions of cycles when the core has no clock."""
    cycles = _metric(rows, model, target, silicon_metric(core.name))
    if cycles is None:
        return None
    return cycles / (core.ghz * 1e6) if core.ghz else cycles / 1e6


def _silicon_speedup(rows: dict[tuple[str, str], PerfResult], model: str, target: str, core: Core) -> str:
    """Estimated speedup of ``target``'s code over rv64gc's on the same core."""
    base, now = _estimate(rows, model, "rv64gc", core), _estimate(rows, model, target, core)
    return f"{base / now:.2f}x" if base and now and target != "rv64gc" else "-"


def table_one(rows: dict[tuple[str, str], PerfResult]) -> list[str]:
    cores = _cores(rows)
    header = ["Model", "Target", "Time (min s)", "Mem (peak RSS MB)", "static vector instr",
              "executed vector %", "speedup vs rv64gc"]
    for core in cores:
        unit = "ms" if core.ghz else "Mcycles"
        header += [f"est. {core.label} {unit}", f"est. speedup vs rv64gc on {core.label}"]
    calibrated = any(r.calibration for r in rows.values())
    if calibrated:
        header.append("est. / measured on that machine's core")
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for (model, target), record in sorted(rows.items()):
        m = record.metrics
        time = f"{m['wall_s_min']:.3f}" if "wall_s_min" in m else "-"
        mem = f"{m['peak_rss_kb'] / 1024:.1f}" if "peak_rss_kb" in m else "-"
        static = str(m["static_vector"]) if "static_vector" in m else "-"
        executed = (f"{100 * m['executed_dispatch_vector'] / m['executed_dispatch_instructions']:.1f}"
                    if m.get("executed_dispatch_instructions") else "-")
        where = f"{target} on board {_board(record)}" if _board(record) else target
        if _board(record):
            mem = f"{m['board_peak_rss_kb'] / 1024:.1f}" if "board_peak_rss_kb" in m else "-"
        cells = [model, where, time, mem, static, executed, _speedup(rows, model, target)]
        for core in cores:
            estimate = _estimate(rows, model, target, core)
            cells += [f"{estimate:.2f}" if estimate is not None else "-", _silicon_speedup(rows, model, target, core)]
        if calibrated:
            point = record.calibration
            cells.append(kernels.silicon_run_text(point) if point else "-")
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def table_one_note(rows: dict[tuple[str, str], dict[str, Any]]) -> list[str]:
    """The line under Table 1 saying what its estimates are, when it has any."""
    return [f"est. = estimated on the silicon core by LLVM's machine model: {WHAT_IT_IS}"] if _cores(rows) else []


# The study's comparison, default path vs data-tiled microkernel path: (column, metric, format)
MICROKERNEL_METRICS = (
    ("executed per call (M)", "executed_per_call_instructions", 1e6),
    ("executed once, at load (M)", "executed_one_time_instructions", 1e6),
    ("static vector %", None, 0),
    ("IREE peak (KiB)", "iree_peak_bytes", 1024),
    ("module (KiB)", "module_bytes", 1024),
)


def _static_share(metrics: dict[str, Any]) -> float | None:
    if not metrics.get("static_instructions"):
        return None
    return 100 * metrics.get("static_vector", 0) / metrics["static_instructions"]


def microkernel_table(rows: dict[tuple[str, str], PerfResult], pairs: list[tuple[str, str]]) -> list[str]:
    """Default path vs data-tiled microkernel path per model x pair: each metric both ways and the ratio
    (microkernel / default; below 1 is less)."""
    cores = _cores(rows)
    header = ["Model", "default -> microkernel"]
    for column, _, _ in MICROKERNEL_METRICS:
        header += [column, "ratio"]
    estimated = [c for c in cores if any(silicon_metric(c.name) in rows[(m, t)].metrics
                                         for (m, t) in rows for pair in pairs if t == pair[1])]
    for core in estimated:
        header += [f"est. {core.label} Mcycles per call", "ratio"]
    lines = []
    for default, tiled in pairs:
        for model in sorted({m for m, t in rows if t == tiled and (m, default) in rows}):
            a, b = rows[(model, default)].metrics, rows[(model, tiled)].metrics
            cells = [model, f"{default} -> {tiled}"]
            values = [((a.get(metric), b.get(metric)) if metric else (_static_share(a), _static_share(b)), scale)
                      for _, metric, scale in MICROKERNEL_METRICS]
            values += [(tuple(rows[(model, t)].per_call_cycles(c.name) for t in (default, tiled)), 1e6)
                       for c in estimated]
            for (before, after), scale in values:
                shown = [("-" if v is None else f"{v / scale:.2f}" if scale else f"{v:.1f}") for v in (before, after)]
                ratio = f"{after / before:.2f}x" if before and after is not None else "-"
                cells += [" -> ".join(shown), ratio]
            lines.append("| " + " | ".join(cells) + " |")
    if not lines:
        return []
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header), *lines]


def microkernel_figure(plt: Any, rows: dict[tuple[str, str], PerfResult], pairs: list[tuple[str, str]]) -> Any:
    """Microkernel path / default path, per model: executed instructions and estimated cycles (below 1: less)."""
    series: dict[str, dict[str, float]] = {}
    for default, tiled in pairs:
        for (model, target), record in rows.items():
            if target != tiled or (model, default) not in rows:
                continue
            a, b = rows[(model, default)].metrics, record.metrics
            names = ["executed_per_call_instructions", *sorted(m for m in b if m.startswith(f"{SILICON}@"))]
            for name in names:
                if a.get(name) and b.get(name) is not None:
                    label = f"{name.replace('executed_per_call_instructions', 'executed per call')} ({tiled})"
                    series.setdefault(label, {})[model] = b[name] / a[name]
    models = sorted({m for values in series.values() for m in values})
    fig, ax = plt.subplots(figsize=(max(6, len(models) * 0.9), 4))
    width = 0.8 / max(len(series), 1)
    for i, (label, values) in enumerate(sorted(series.items())):
        ax.bar([x + i * width for x in range(len(models))], [values.get(m, 0) for m in models], width, label=label)
    ax.axhline(1.0, color="grey", linewidth=0.8)
    ax.set_xticks([x + width * (len(series) - 1) / 2 for x in range(len(models))], models, rotation=30, ha="right")
    ax.set_ylabel("microkernel path / default path")
    ax.legend(fontsize="x-small")
    return fig


def hot_dispatches(rows: dict[tuple[str, str], PerfResult], shown: int = 3) -> list[str]:
    """Where the silicon would spend its time: the top dispatches by estimated cycles, per model x target x core."""
    lines = []
    for (model, target), record in sorted(rows.items()):
        for core, dispatches in sorted(record.silicon.items()):
            total = sum(dispatches.values())
            if not total:
                continue
            top = sorted(dispatches.items(), key=lambda kv: (-kv[1], kv[0]))[:shown]
            share = sum(c for _, c in top) / total
            listed = ", ".join(f"{k} {c / total:.0%}" for k, c in top)
            lines.append(f"- {model} on {target}, {core}: top {len(top)} = {share:.0%} of {total} cycles: {listed}")
    return lines


def kernel_lines(entries: list[dict[str, Any]]) -> list[str]:
    """The kernel dashboard and its calibration against published silicon, as Markdown."""
    if not entries:
        return []
    lines = ["## Kernel dashboard: every matmul path per row x shape", "",
             f"est. = estimated {kernels.CORE} cycles ({WHAT_IT_IS}) of one call; + once = what loading the module "
             "does once (packing constant weights); (vs default) = that path / the default path, per call; "
             "vsetvl / vrgather = thousands executed in the dispatches; DRAM KiB / L2 misses (k) = one call's "
             f"dispatches on the {kernels.CORE}'s modelled caches (one core).", "", *kernels.dashboard_table(entries)]
    if rows := kernels.calibration(entries):
        lines += ["", "## The estimator against published silicon", "", *kernels.calibration_table(rows), "",
                  kernels.CALIBRATION_NOTE]
    return lines


def write_report(directory: Path, rows: dict[tuple[str, str], PerfResult],
                 pairs: Sequence[tuple[str, str]] = (), entries: list[dict[str, Any]] | None = None,
                 estimator: list[dict[str, Any]] | None = None) -> list[Path]:
    """JSON, Markdown and PNG plots (matplotlib, Agg backend) of the collected results; ``pairs`` are the
    (default, microkernel) target pairs compared side by side."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    directory.mkdir(parents=True, exist_ok=True)
    written = [directory / "performance.json", directory / "performance.md"]
    atomic_write_bytes(written[0], json.dumps([rows[k].to_json() for k in sorted(rows)], indent=1).encode())
    markdown = ["# pytest-rvv performance", "", *table_one(rows)]
    if micro := microkernel_table(rows, list(pairs)):
        markdown += ["", "## Default path vs data-tiled microkernel path", "", *micro, "",
                     f"Estimates: {WHAT_IT_IS}."]
    if entries:
        markdown += ["", *kernel_lines(entries)]
    if estimator:
        markdown += ["", "## The estimator per instruction against published silicon", "",
                     *estimator_table(estimator)]
    if hot := hot_dispatches(rows):
        markdown += ["", "## Where the silicon would spend its time (estimated cycles)", "",
                     f"Estimates: {WHAT_IT_IS}.", "", *hot]
    atomic_write_bytes(written[1], ("\n".join(markdown) + "\n").encode())
    models = sorted({m for m, _ in rows})
    targets = sorted({t for _, t in rows})
    plots = [("time", "wall_s_min", "emulated run time, min (s)", True),
             ("memory", "peak_rss_kb", "peak RSS of the run (KiB; the emulator's)", False),
             ("vector_instructions", "static_vector", "static vector instructions", False)]
    for name, metric, label, log in plots:
        fig, ax = plt.subplots(figsize=(max(6, len(models) * 0.9), 4))
        width = 0.8 / max(len(targets), 1)
        for i, target in enumerate(targets):
            values = [_metric(rows, m, target, metric) or 0 for m in models]
            ax.bar([x + i * width for x in range(len(models))], values, width, label=target)
        ax.set_xticks([x + width * (len(targets) - 1) / 2 for x in range(len(models))], models, rotation=30,
                      ha="right")
        ax.set_ylabel(label)
        if log:
            ax.set_yscale("log")
        ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.0, 1.0))
        written.append(_save(plt, fig, directory / f"{name}.png"))
    written.append(_save(plt, speedup_figure(plt, rows), directory / "speedup.png"))
    if _cores(rows):
        written.append(_save(plt, silicon_figure(plt, rows), directory / "silicon.png"))
    if microkernel_table(rows, list(pairs)):
        written.append(_save(plt, microkernel_figure(plt, rows, list(pairs)), directory / "microkernels.png"))
    if entries:
        written.append(_save(plt, kernels.figure(plt, entries), directory / "kernels.png"))
    return written


def _save(plt: Any, fig: Any, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def silicon_figure(plt: Any, rows: dict[tuple[str, str], PerfResult]) -> Any:
    """Emulated time vs estimated silicon time per model x target (log-log): emulation inverts the truth."""
    fig, ax = plt.subplots(figsize=(7, 5))
    for core in _cores(rows):
        points = [(r.metrics[WALL_S_MIN], _estimate(rows, m, t, core), t) for (m, t), r in sorted(rows.items())
                  if WALL_S_MIN in r.metrics and _estimate(rows, m, t, core)]
        for target in sorted({p[2] for p in points}):
            xs = [x for x, _, t in points if t == target]
            ys = [y for _, y, t in points if t == target]
            ax.scatter(xs, ys, label=f"{target} on {core.label}", s=18)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("emulated run time under QEMU, min (s)")
    ax.set_ylabel("estimated silicon time (ms, or Mcycles without a clock)")
    ax.set_title("emulated vs estimated silicon time, per model x target", fontsize="medium")
    ax.legend(fontsize="x-small")
    return fig


def speedup_figure(plt: Any, rows: dict[tuple[str, str], PerfResult]) -> Any:
    """Speedup of each RVV target over rv64gc (min wall time), like the study's figure."""
    models = sorted({m for m, _ in rows})
    vector_targets = sorted({t for _, t in rows if t.startswith("rv64gcv")})
    fig, ax = plt.subplots(figsize=(max(6, len(models) * 0.9), 4))
    width = 0.8 / max(len(vector_targets), 1)
    plotted = False
    for i, target in enumerate(vector_targets):
        values = []
        for model in models:
            base = _metric(rows, model, "rv64gc", WALL_S_MIN)
            now = _metric(rows, model, target, WALL_S_MIN)
            values.append(base / now if base and now else 0.0)
        plotted |= any(values)
        ax.bar([x + i * width for x in range(len(models))], values, width, label=target)
    if not plotted:
        ax.text(0.5, 0.5, "no rv64gc / RVV timings: riscv64 runs need --rvv-runtime-riscv64",
                ha="center", va="center", transform=ax.transAxes)
    ax.axhline(1.0, color="grey", linewidth=0.8)
    ax.set_xticks(range(len(models)), models, rotation=30, ha="right")
    ax.set_ylabel("speedup vs rv64gc (min wall time)")
    if plotted:
        ax.legend(fontsize="small")
    return fig


class PerformanceCollector:
    """pytest plugin object: the performance records, verdicts, notes and estimator timings from reports (xdist
    workers' too); plugin.py hands them to the reports at the session's end (report/sections.py)."""

    def __init__(self, session: RvvSession) -> None:
        self.rows: dict[tuple[str, str], PerfResult] = {}
        self.verdicts: dict[tuple[str, str], list[Any]] = {}  # (metric, baseline, now, verdict) per judged cell
        self.notes: dict[str, list[str]] = {}  # the same note on many tests is shown once, with a count
        self.improvements: list[str] = []
        self.estimator: list[dict[str, Any]] = []  # the estimator against published instruction timings
        self.pairs = microkernel_pairs(session.settings.known_targets)
        self.kernel_cells = session.settings.kernels.cells if session.settings.kernels else ()
        self._dashboard: tuple[int, list[dict[str, Any]]] | None = None

    @property
    def kernels(self) -> list[dict[str, Any]]:
        """The kernel dashboard of this run (report/kernels.py), empty without kernel cells; made once per set of
        records (the reports and the terminal read it after the last test)."""
        if self._dashboard is None or self._dashboard[0] != len(self.rows):
            self._dashboard = (len(self.rows), kernels.dashboard(self.kernel_cells, self.rows)
                               if self.kernel_cells else [])
        return self._dashboard[1]

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "call":
            record = Record.of(report)
            if record.performance is not None:  # recorded only after the model agreed with onnxruntime
                value = PerfResult.from_json(record.performance)
                self.rows[(value.model, value.target)] = value
            if record.perf_rows is not None and record.cell is not None:
                self.verdicts[(record.cell[0], record.cell[1])] = record.perf_rows
            for note in record.notes:
                self.notes.setdefault(_generic(note), []).append(note)
            self.improvements += record.improvements
            if record.estimator is not None:
                self.estimator.append(record.estimator)


def _generic(note: str) -> str:
    """A note with its model x target path parts removed, to group identical notes."""
    return re.sub(r"\S*baselines/performance/\S*", "<baseline>", note)
