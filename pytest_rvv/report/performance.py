"""Performance reporting: the controller collects results; Table 1 and its companions are formatted here.

Table 1 leads with what holds on silicon: Model | Target | work per call | work vs rv64gc | est. <core> ms | est.
speedup vs rv64gc on <core> | est. <core> wall ms at each thread count measured (bound by) | static vector instr |
executed vector % | then the emulated columns, labelled so (QEMU time, QEMU speedup vs rv64gc) and Mem. An estimate
resting on an instruction LLVM's model of the core is known to get wrong (measure/caveats.py) is marked in its row,
with a legend. ``--rvv-report=DIR`` also writes JSON, Markdown and PNG plots (the silicon-facing ones first).
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from pytest_rvv.base.record import Record
from pytest_rvv.base.store import atomic_write_bytes
from pytest_rvv.config.cores import CORES, Core, cycles_ms
from pytest_rvv.config.targets import microkernel_pairs
from pytest_rvv.measure.metrics import (
    BOARD_PEAK_RSS_KB,
    EXECUTED_DISPATCH_INSTRUCTIONS,
    EXECUTED_DISPATCH_VECTOR,
    EXECUTED_ONE_TIME_INSTRUCTIONS,
    EXECUTED_PER_CALL_INSTRUCTIONS,
    IREE_PEAK_BYTES,
    MODULE_BYTES,
    PEAK_RSS_KB,
    SILICON,
    STATIC_INSTRUCTIONS,
    STATIC_VECTOR,
    WALL_S_MIN,
    silicon_metric,
)
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


def _emulated(record: PerfResult) -> bool:
    """True when the cell's run-side metrics come from QEMU (not this machine natively, not a board)."""
    return not record.board_name and record.toolchain.get("qemu", "none") != "none"


def _speedup(rows: dict[tuple[str, str], PerfResult], model: str, target: str) -> str:
    """Run-time speedup over rv64gc measured the same way (both emulated, or both on the same board), riscv64 only;
    a board's is marked (board): every other is QEMU's."""
    record = rows.get((model, target))
    base_record = next((r for (m, t), r in rows.items() if m == model and _board(r) == _board(record)
                        and (t == "rv64gc" or t.endswith("-rv64gc"))), None)
    if not (target.startswith("rv64") or _board(record)) or base_record is None or base_record is record:
        return "-"
    base = base_record.metrics.get(WALL_S_MIN)
    now = _metric(rows, model, target, WALL_S_MIN)
    return f"{base / now:.2f}x" + (" (board)" if _board(record) else "") if base and now else "-"


def _work(rows: dict[tuple[str, str], PerfResult], model: str, target: str) -> float | None:
    """Instructions the dispatches execute per call (the module load's left out): the same on silicon."""
    return _metric(rows, model, target, EXECUTED_PER_CALL_INSTRUCTIONS)


def _work_ratio(rows: dict[tuple[str, str], PerfResult], model: str, target: str) -> float | None:
    """Executed work per call over the same model's rv64gc cell (below 1: less work)."""
    base, now = _work(rows, model, "rv64gc"), _work(rows, model, target)
    return now / base if base and now is not None and target != "rv64gc" else None


def _cores(rows: dict[tuple[str, str], PerfResult]) -> list[Core]:
    """The silicon cores estimated in these rows, in the order of the core table."""
    names = {m.partition("@")[2] for r in rows.values() for m in r.metrics if m.startswith(f"{SILICON}@")}
    names |= {core for r in rows.values() for core in r.wall}
    order = list(CORES)
    return [CORES[n] if n in CORES else Core(n, 0, n)
            for n in sorted(names, key=lambda n: (order.index(n) if n in CORES else len(order), n))]


def _estimate(rows: dict[tuple[str, str], PerfResult], model: str, target: str, core: Core) -> float | None:
    """Estimated time of one call on ``core`` (the module load's left out, as the work is) in ms (cycles / clock), or
    millions of cycles when the core has no clock."""
    record = rows.get((model, target))
    cycles = record.per_call_cycles(core.name) if record is not None else None
    if cycles is None:
        return None
    return cycles_ms(cycles, core.ghz or 1.0)


def _silicon_ratio(rows: dict[tuple[str, str], PerfResult], model: str, target: str, core: Core) -> float | None:
    """Estimated speedup of ``target``'s code over rv64gc's on the same core."""
    base, now = _estimate(rows, model, "rv64gc", core), _estimate(rows, model, target, core)
    return base / now if base and now and target != "rv64gc" else None


def _x(value: float | None) -> str:
    return "-" if value is None else f"{_figure(value)}x"


def _figure(value: float) -> str:
    """Two decimals, or two significant digits below 0.1 (a small model's work or estimate is not 0.00)."""
    return f"{value:.2f}" if abs(value) >= 0.1 or value == 0 else f"{value:.2g}"


CAVEAT = "\u2020"  # marks an estimate resting on an instruction LLVM's model of the core is known to get wrong


def _marked(record: PerfResult, core: Core) -> str:
    return CAVEAT if record.caveats.get(core.name) else ""


def wall_threads(rows: dict[tuple[str, str], PerfResult]) -> dict[str, list[str]]:
    """Per core, the thread counts some cell's estimated wall time was measured at (1 first)."""
    found: dict[str, set[str]] = {}
    for record in rows.values():
        for core, walls in record.wall.items():
            found.setdefault(core, set()).update(walls)
    return {core: sorted(threads, key=int) for core, threads in found.items()}


def wall_cell(record: PerfResult, core: str, threads: list[str], mark: str = "") -> str:
    """Est. wall ms of one call at each of ``threads`` and what bounds it at each, or - when not measured."""
    walls = record.wall.get(core)
    if not walls:
        return "-"
    return kernels.wall_text({t: w["seconds"] * 1e3 for t, w in walls.items()},
                             {t: w["bound_by"] for t, w in walls.items()}, threads, mark)


def wall_header(core: Core, threads: list[str]) -> str:
    return f"est. {core.label} wall ms, {' / '.join(threads)} thread{'s' if threads != ['1'] else ''} (bound by)"


def table_one(rows: dict[tuple[str, str], PerfResult]) -> list[str]:
    """Table 1, what holds on silicon first: executed work per call and its ratio to rv64gc, the in-core estimate
    per core and its speedup over rv64gc, the estimated wall time per thread count (where measured); then the
    static and executed vector counts; then the emulated time and its speedup (QEMU's, labelled so) and memory."""
    cores = _cores(rows)
    estimated = [c for c in cores if any(silicon_metric(c.name) in r.metrics for r in rows.values())]
    walls = wall_threads(rows)
    header = ["Model", "Target", "work per call (M instr)", "work vs rv64gc"]
    for core in estimated:
        unit = "ms" if core.ghz else "Mcycles"
        header += [f"est. {core.label} {unit} per call", f"est. speedup vs rv64gc on {core.label}"]
    header += [wall_header(core, walls[core.name]) for core in cores if core.name in walls]
    header += ["static vector instr", "executed vector %", "QEMU time (min s)", "QEMU speedup vs rv64gc",
               "Mem (peak RSS MB)"]
    calibrated = any(r.calibration for r in rows.values())
    if calibrated:
        header.append("est. / measured on that machine's core")
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for (model, target), record in sorted(rows.items()):
        m = record.metrics
        work = _work(rows, model, target)
        cells = [model, f"{target} on board {_board(record)}" if _board(record) else target,
                 "-" if work is None else _figure(work / 1e6), _x(_work_ratio(rows, model, target))]
        for core in estimated:
            estimate = _estimate(rows, model, target, core)
            cells += ["-" if estimate is None else f"{_figure(estimate)}{_marked(record, core)}",
                      _x(_silicon_ratio(rows, model, target, core))]
        cells += [wall_cell(record, core.name, walls[core.name], _marked(record, core))
                  for core in cores if core.name in walls]
        time = "-"
        if WALL_S_MIN in m:
            time = f"{m[WALL_S_MIN]:.3f}" + ("" if _emulated(record) else " (board)" if _board(record)
                                             else " (native)")
        rss = BOARD_PEAK_RSS_KB if _board(record) else PEAK_RSS_KB
        mem = f"{m[rss] / 1024:.1f}" if rss in m else "-"
        static = str(m[STATIC_VECTOR]) if STATIC_VECTOR in m else "-"
        executed = (f"{100 * m[EXECUTED_DISPATCH_VECTOR] / m[EXECUTED_DISPATCH_INSTRUCTIONS]:.1f}"
                    if m.get(EXECUTED_DISPATCH_INSTRUCTIONS) else "-")
        cells += [static, executed, time, _speedup(rows, model, target), mem]
        if calibrated:
            point = record.calibration
            cells.append(kernels.silicon_run_text(point) if point else "-")
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def table_one_note(rows: dict[tuple[str, str], PerfResult]) -> list[str]:
    """The lines under Table 1: what its columns are (work, estimates, emulated time) and the legend of its marks."""
    lines = ["work = instructions the dispatches execute per call (the module load's left out), counted under QEMU "
             "and the same on silicon; work vs rv64gc = that / the model's rv64gc cell's (below 1: less work)."]
    if _cores(rows):
        lines.append(f"est. = estimated on the silicon core by LLVM's machine model: {WHAT_IT_IS}.")
    if any(r.wall for r in rows.values()):
        lines.append("est. wall ms = one call's in-core estimate plus stalls on the core's modelled caches and memory, "
                     "at N local-task threads run under QEMU (the slowest thread), and what bounds it: compute, L2, "
                     "DRAM or imbalance (measure/walltime.py; --rvv-wall-time=CORE[:THREADS]).")
    lines.append("QEMU time and QEMU speedup are emulated: QEMU's time is not silicon time, and inverts it for vector "
                 "code (native: this machine's own run; board: measured on that board).")
    return lines + caveat_legend(rows)


def caveat_legend(rows: dict[tuple[str, str], PerfResult], shown: int = 4) -> list[str]:
    """One line per known model error some cell's estimate rests on: the instruction, the cells (with the share of
    their estimated cycles in blocks holding it) and the measured error."""
    marked: dict[tuple[str, str, str], list[str]] = {}
    for (model, target), record in sorted(rows.items()):
        for core, caveats in sorted(record.caveats.items()):
            for c in caveats:
                share = f", {c['share_percent']:.0f} % of its est." if c.get("share_percent") is not None else ""
                marked.setdefault((core, c["instruction"], c["reason"]), []).append(f"{model} on {target}{share}")
    lines = []
    for (core, instruction, reason), cells in marked.items():
        label = CORES[core].label if core in CORES else core
        more = f" and {len(cells) - shown} more" if len(cells) > shown else ""
        lines.append(f"{CAVEAT} est. {label} rests on {instruction}, which LLVM's model gets wrong, in "
                     f"{len(cells)} cell{'s' if len(cells) != 1 else ''} ({'; '.join(cells[:shown])}{more}): "
                     f"{reason}.")
    return lines


# The study's comparison, default path vs data-tiled microkernel path: (column, metric, format). The executed work
# per call leads, then the estimates (microkernel_table), then these.
MICROKERNEL_WORK = ("executed per call (M)", EXECUTED_PER_CALL_INSTRUCTIONS, 1e6)
MICROKERNEL_METRICS = (
    ("executed once, at load (M)", EXECUTED_ONE_TIME_INSTRUCTIONS, 1e6),
    ("static vector %", None, 0),
    ("IREE peak (KiB)", IREE_PEAK_BYTES, 1024),
    ("module (KiB)", MODULE_BYTES, 1024),
)


def _static_share(metrics: dict[str, Any]) -> float | None:
    if not metrics.get(STATIC_INSTRUCTIONS):
        return None
    return 100 * metrics.get(STATIC_VECTOR, 0) / metrics[STATIC_INSTRUCTIONS]


def _wall_ms(record: PerfResult, core: str, threads: str) -> float | None:
    wall = record.wall.get(core, {}).get(threads)
    return None if wall is None else wall["seconds"] * 1e3


def microkernel_table(rows: dict[tuple[str, str], PerfResult], pairs: list[tuple[str, str]]) -> list[str]:
    """Default path vs data-tiled microkernel path per model x pair: executed work per call, the estimated cycles
    per call and (where measured) the estimated wall time per thread count first, then the other metrics; each
    both ways and the ratio (microkernel / default; below 1 is less)."""
    cores = _cores(rows)
    paired = [(m, t) for (m, t) in rows for pair in pairs if t == pair[1]]
    estimated = [c for c in cores if any(silicon_metric(c.name) in rows[cell].metrics for cell in paired)]
    walls = wall_threads({cell: rows[cell] for pair in pairs for cell in rows if cell[1] in pair})
    walled = [(c, t) for c in cores for t in walls.get(c.name, [])]
    header = ["Model", "default -> microkernel", MICROKERNEL_WORK[0], "ratio"]
    for core in estimated:
        header += [f"est. {core.label} Mcycles per call", "ratio"]
    for core, threads in walled:
        header += [f"est. {core.label} wall ms, {threads} thread{'s' if threads != '1' else ''}", "ratio"]
    for column, _, _ in MICROKERNEL_METRICS:
        header += [column, "ratio"]
    header += ["vregs spilled, executed (k)", "ratio"]
    lines = []
    for default, tiled in pairs:
        for model in sorted({m for m, t in rows if t == tiled and (m, default) in rows}):
            records = [rows[(model, default)], rows[(model, tiled)]]
            a, b = (r.metrics for r in records)
            cells = [model, f"{default} -> {tiled}"]
            values = [((a.get(MICROKERNEL_WORK[1]), b.get(MICROKERNEL_WORK[1])), MICROKERNEL_WORK[2], ("", ""))]
            values += [(tuple(r.per_call_cycles(c.name) for r in records), 1e6,
                        tuple(_marked(r, c) for r in records)) for c in estimated]
            values += [(tuple(_wall_ms(r, c.name, t) for r in records), None,  # ms to the microsecond, as Table 1
                        tuple(_marked(r, c) for r in records)) for c, t in walled]
            values += [((a.get(metric), b.get(metric)) if metric else (_static_share(a), _static_share(b)), scale,
                        ("", "")) for _, metric, scale in MICROKERNEL_METRICS]
            values += [(tuple(r.spilled_registers() for r in records), 1e3, ("", ""))]
            for (before, after), scale, marks in values:
                shown = [("-" if v is None else (f"{v:.3f}" if scale is None else f"{v / scale:.2f}" if scale
                                                 else f"{v:.1f}") + mark)
                         for v, mark in zip((before, after), marks, strict=True)]
                ratio = f"{after / before:.2f}x" if before and after is not None else "-"
                cells += [" -> ".join(shown), ratio]
            lines.append("| " + " | ".join(cells) + " |")
    if not lines:
        return []
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header), *lines]


def microkernel_figure(plt: Any, rows: dict[tuple[str, str], PerfResult], pairs: list[tuple[str, str]]) -> Any:
    """Microkernel path / default path, per model: executed instructions, estimated cycles and (where measured) the
    estimated wall time per thread count (below 1: less)."""
    series: dict[str, dict[str, float]] = {}
    for default, tiled in pairs:
        for (model, target), record in rows.items():
            if target != tiled or (model, default) not in rows:
                continue
            base = rows[(model, default)]
            a, b = base.metrics, record.metrics
            names = [EXECUTED_PER_CALL_INSTRUCTIONS, *sorted(m for m in b if m.startswith(f"{SILICON}@"))]
            for name in names:
                if a.get(name) and b.get(name) is not None:
                    label = f"{name.replace(EXECUTED_PER_CALL_INSTRUCTIONS, 'executed per call')} ({tiled})"
                    series.setdefault(label, {})[model] = b[name] / a[name]
            for core, walls in record.wall.items():
                for threads in walls:
                    before, after = _wall_ms(base, core, threads), _wall_ms(record, core, threads)
                    if before and after is not None:
                        series.setdefault(f"est. wall {core}, {threads} threads ({tiled})", {})[model] = after / before
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


def kernel_lines(entries: list[kernels.KernelEntry]) -> list[str]:
    """The kernel dashboard and its calibration against published silicon, as Markdown."""
    if not entries:
        return []
    lines = ["## Kernel dashboard: every matmul path per row x shape", "",
             f"est. = estimated {kernels.CORE} cycles ({WHAT_IT_IS}) of one call; + once = what loading the module "
             "does once (packing constant weights); (vs default) = that path / the default path, per call; "
             "vsetvl / vrgather / vregs spilled = thousands executed in the dispatches (vector registers moved by "
             "spills and reloads); DRAM KiB / L2 misses (k) = one call's "
             f"dispatches on the {kernels.CORE}'s modelled caches (one core).", "", *kernels.dashboard_table(entries)]
    if rows := kernels.calibration(entries):
        lines += ["", "## The estimator against published silicon", "", *kernels.calibration_table(rows), "",
                  kernels.CALIBRATION_NOTE]
    return lines


# The plots write_report draws, in the order performance.md and the terminal list them: what holds on silicon first,
# emulated time last (file name, title)
PLOTS = (("speedup.png", "Executed work and estimated speedup vs rv64gc per model (what holds on silicon)"),
         ("microkernels.png", "Data-tiled microkernel path / default path: executed work and estimates"),
         ("kernels.png", "Kernels: estimated cycles of each matmul path / the default path"),
         ("vector_instructions.png", "Static vector instructions"),
         ("memory.png", "Peak RSS of the run (emulated runs: QEMU's)"),
         ("silicon.png", "Emulated time vs estimated silicon time (emulation inverts the truth)"),
         ("time.png", "Emulated run time (QEMU; not silicon time)"),
         ("speedup_emulated.png", "Emulated speedup vs rv64gc (QEMU time; not silicon time)"))


def write_report(directory: Path, rows: dict[tuple[str, str], PerfResult],
                 pairs: Sequence[tuple[str, str]] = (), entries: list[kernels.KernelEntry] | None = None,
                 estimator: list[dict[str, Any]] | None = None) -> list[Path]:
    """JSON, Markdown and PNG plots (matplotlib, Agg backend) of the collected results; ``pairs`` are the
    (default, microkernel) target pairs compared side by side. The plots are listed (and embedded in the Markdown)
    in ``PLOTS``' order: the silicon-facing ones first."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    directory.mkdir(parents=True, exist_ok=True)
    written = [directory / "performance.json", directory / "performance.md"]
    atomic_write_bytes(written[0], json.dumps([rows[k].to_json() for k in sorted(rows)], indent=1).encode())
    models = sorted({m for m, _ in rows})
    targets = sorted({t for _, t in rows})
    drawn: dict[str, Any] = {}
    if speedups := against_rv64gc(rows):  # the speedups need a model's rv64gc cell and another riscv64 one
        drawn["speedup.png"] = lambda: speedup_figure(plt, rows)
    if microkernel_table(rows, list(pairs)):
        drawn["microkernels.png"] = lambda: microkernel_figure(plt, rows, list(pairs))
    if entries:
        drawn["kernels.png"] = lambda: kernels.figure(plt, entries)
    for name, metric, label, log in (("vector_instructions.png", STATIC_VECTOR, "static vector instructions", False),
                                     ("memory.png", PEAK_RSS_KB, "peak RSS of the run (KiB; the emulator's)", False)):
        drawn[name] = functools.partial(_bars_by_target, plt, rows, models, targets, metric, label, log)
    if _cores(rows):
        drawn["silicon.png"] = lambda: silicon_figure(plt, rows)
    drawn["time.png"] = functools.partial(_bars_by_target, plt, rows, models, targets, WALL_S_MIN,
                                          "emulated run time under QEMU, min (s): not silicon time", True)
    if speedups:
        drawn["speedup_emulated.png"] = lambda: emulated_speedup_figure(plt, rows)
    plots = [(name, title) for name, title in PLOTS if name in drawn]
    for name, _ in plots:
        written.append(_save(plt, drawn[name](), directory / name))
    markdown = ["# pytest-rvv performance", "", *table_one(rows), "", *table_one_note(rows)]
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
    markdown += ["", "## Plots", ""] + [f"### {title}\n\n![{title}]({name})\n" for name, title in plots]
    atomic_write_bytes(written[1], ("\n".join(markdown) + "\n").encode())
    return written


def against_rv64gc(rows: dict[tuple[str, str], PerfResult]) -> bool:
    """True when some model has an rv64gc cell and another riscv64 cell (the speedup plots' bars)."""
    return any((m, "rv64gc") in rows for m, t in rows if t.startswith("rv64") and t != "rv64gc")


def _bars_by_target(plt: Any, rows: dict[tuple[str, str], PerfResult], models: list[str], targets: list[str],
                    metric: str, label: str, log: bool) -> Any:
    """One metric per model, a bar per target."""
    fig, ax = plt.subplots(figsize=(max(6, len(models) * 0.9), 4))
    width = 0.8 / max(len(targets), 1)
    for i, target in enumerate(targets):
        values = [_metric(rows, m, target, metric) or 0 for m in models]
        ax.bar([x + i * width for x in range(len(models))], values, width, label=target)
    ax.set_xticks([x + width * (len(targets) - 1) / 2 for x in range(len(models))], models, rotation=30, ha="right")
    ax.set_ylabel(label)
    if log:
        ax.set_yscale("log")
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return fig


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
    """What holds on silicon, per model and riscv64 target against its rv64gc cell: the executed work per call (below
    1: less work) and, per estimated core, the estimated speedup (above 1: faster); one panel each."""
    models = sorted({m for m, _ in rows})
    vector_targets = sorted({t for _, t in rows if t.startswith("rv64") and t != "rv64gc"})
    panels: list[tuple[str, str, Any]] = [("executed work per call / rv64gc's (below 1: less work)", "work / rv64gc",
                                           lambda m, t: _work_ratio(rows, m, t))]
    panels += [(f"est. speedup vs rv64gc on {core.label}, one call (above 1: faster)", "est. speedup",
                functools.partial(lambda m, t, core: _silicon_ratio(rows, m, t, core), core=core))
               for core in _cores(rows)]
    panels = [panel for panel in panels if any(panel[2](m, t) for m in models for t in vector_targets)] or panels[:1]
    fig, axes = plt.subplots(len(panels), 1, figsize=(max(6, len(models) * 0.9), 2.6 * len(panels) + 0.6),
                             squeeze=False)
    width = 0.8 / max(len(vector_targets), 1)
    plotted = False
    for ax, (title, label, value) in zip(axes[:, 0], panels, strict=True):
        for i, target in enumerate(vector_targets):
            values = [value(model, target) or 0.0 for model in models]
            plotted |= any(values)
            ax.bar([x + i * width for x in range(len(models))], values, width, label=target)
        ax.axhline(1.0, color="grey", linewidth=0.8)
        ax.set_xticks([x + width * (len(vector_targets) - 1) / 2 for x in range(len(models))], models, rotation=30,
                      ha="right")
        ax.set_title(title, fontsize="medium")
        ax.set_ylabel(label)
        if vector_targets:
            ax.legend(fontsize="x-small", loc="upper left", bbox_to_anchor=(1.0, 1.0))
    if not plotted:
        axes[0, 0].text(0.5, 0.5, "no rv64gc / RVV executed counts: riscv64 runs need --rvv-runtime-riscv64",
                        ha="center", va="center", transform=axes[0, 0].transAxes)
    return fig


def emulated_speedup_figure(plt: Any, rows: dict[tuple[str, str], PerfResult]) -> Any:
    """Speedup of each RVV target over rv64gc in QEMU's time (min wall time), like the study's figure: emulated, not
    silicon time (it inverts the truth for vector code)."""
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
    ax.set_ylabel("QEMU speedup vs rv64gc\n(emulated time: not silicon)")
    ax.set_title("emulated: QEMU's time inverts the truth for vector code, see the estimates", fontsize="medium")
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
        self.published_rows: dict[str, kernels.PinnedRow] = {}  # published rows estimated with their pinned release
        self._dashboard: tuple[int, int, list[kernels.KernelEntry]] | None = None

    @property
    def kernels(self) -> list[kernels.KernelEntry]:
        """The kernel dashboard of this run (report/kernels.py), empty without kernel cells; made once per set of
        records (the reports and the terminal read it after the last test)."""
        made = (len(self.rows), len(self.published_rows))
        if self._dashboard is None or self._dashboard[:2] != made:
            entries = kernels.dashboard(self.kernel_cells, self.rows) if self.kernel_cells else []
            self._dashboard = (*made, kernels.with_pinned(entries, self.published_rows))
        return self._dashboard[2]

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
            if record.published_row is not None:
                pinned = kernels.PinnedRow.from_json(record.published_row)
                self.published_rows[pinned.id] = pinned


def _generic(note: str) -> str:
    """A note with its model x target path parts removed, to group identical notes."""
    return re.sub(r"\S*baselines/performance/\S*", "<baseline>", note)
