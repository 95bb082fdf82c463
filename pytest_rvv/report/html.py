"""``--rvv-report=DIR/index.html``: one self-contained page per run (inline CSS, JS and plots), from a template.

``CellOutcomes`` gathers every test's outcome in its model x target cell from the reports (xdist workers' too);
at the end of the session on the controller ``RunReport`` is handed the run's sections (report/sections.py) and
renders the page, ``results.json`` and the GitHub step summary when ``$GITHUB_STEP_SUMMARY`` is set. It only
formats what the suites and the verdict modules decided.
"""

from __future__ import annotations

import base64
import datetime
import io
import re
import shlex
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pytest_rvv.base.errors import RvvError
from pytest_rvv.base.record import Record
from pytest_rvv.base.store import atomic_write_bytes
from pytest_rvv.comparison.history import changes
from pytest_rvv.comparison.history import load as load_history
from pytest_rvv.comparison.kernels import kernel_changes_table
from pytest_rvv.comparison.record import ComparisonRecord
from pytest_rvv.comparison.report import added_by_dispatch, comparison_status, ranked
from pytest_rvv.judge.baselines import PERF_BASELINES
from pytest_rvv.judge.peers import gaps
from pytest_rvv.judge.vectorization import EXECUTED, STATIC, Records
from pytest_rvv.judge.vectorization import dispatch_table as records_table
from pytest_rvv.measure.dispatch_table import DispatchTable
from pytest_rvv.measure.performance import PerfResult
from pytest_rvv.measure.silicon import WHAT_IT_IS
from pytest_rvv.report import kernels
from pytest_rvv.report.estimator import estimator_table
from pytest_rvv.report.history import HISTORY_DIR, history
from pytest_rvv.report.history_page import change_lines
from pytest_rvv.report.peers import NOTE as PEERS_NOTE
from pytest_rvv.report.peers import (
    STUDIES_NOTE,
    gap_table,
    moved_lines,
    peers_table,
    studies,
    studies_lines,
    studies_table,
)
from pytest_rvv.report.performance import (
    against_rv64gc,
    emulated_speedup_figure,
    hot_dispatches,
    microkernel_figure,
    microkernel_table,
    silicon_figure,
    speedup_figure,
    table_one,
    table_one_note,
)
from pytest_rvv.report.results import append_step_summary, results, step_summary, write_results
from pytest_rvv.report.sections import Sections
from pytest_rvv.session import RvvSession

COULD_NOT_RUN = "could-not-run"  # no runtime loads the toolchain's modules: not a verdict on the code
ORDER = {"failed": 0, "error": 1, COULD_NOT_RUN: 2, "xpassed": 3, "passed": 4, "xfailed": 5, "skipped": 6}
LONGREPR_LIMIT = 20000
# The check each suite module performs, as the verdict grid names it, in pipeline order.
CHECKS = {"test_compile": "compiles", "test_agreement": "correct", "test_static_vectorization": "vectorized",
          "test_executed_vectorization": "vectorized when run", "test_performance": "performance",
          "test_toolchains": "vs reference", "test_onnx_nodes": "conformance", "test_peers": "vs peer"}
CHECK_ORDER = list(CHECKS.values())
DISPATCH_ROWS = 25


# a compared cell's colour: its comparison verdict (CSS classes of the page)
COMPARED_CLASS = {"REGRESSED": "failed", "more work": "xpassed", "less work": "passed", "churn": "passed",
                  "same": "passed"}


def outcome_of(report: pytest.TestReport) -> str:
    if report.failed and Record.of(report).could_not_run is not None:
        return COULD_NOT_RUN
    if hasattr(report, "wasxfail"):
        return "xfailed" if report.skipped else "xpassed"
    if report.when != "call" and report.failed:
        return "error"
    return report.outcome


def verdict(tests: list[dict[str, Any]]) -> str:
    """The worst outcome of some tests (failed before error before xpassed before passed ...)."""
    return min((t["outcome"] for t in tests), key=ORDER.__getitem__) if tests else "none"


def badges(tests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One badge per check of a grid cell, in the tests' order: the check's worst outcome and how many
    tests it stands for (the conformance row runs one test per ONNX node test), counted in its title."""
    by_check: dict[str, list[dict[str, Any]]] = {}
    for t in tests:
        by_check.setdefault(t["check"], []).append(t)
    return [{"check": check, "outcome": verdict(group), "count": len(group),
             "title": group[0]["nodeid"] if len(group) == 1 else ", ".join(
                 f"{sum(t['outcome'] == o for t in group)} {o}" for o in ORDER
                 if any(t["outcome"] == o for t in group))}
            for check, group in by_check.items()]


def anchor(*parts: str) -> str:
    return "cell-" + re.sub(r"[^A-Za-z0-9_.-]+", "-", "-".join(parts))


class CellOutcomes:
    """pytest plugin object: every test's outcome in its model x target cell, from the reports (xdist workers' too)."""

    def __init__(self) -> None:
        self.tests: list[dict[str, Any]] = []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        record = Record.of(report)
        if record.cell is None:
            return
        row, target, check = record.cell
        text = str(report.longrepr)[:LONGREPR_LIMIT] if report.failed and report.longrepr else ""
        reason = ""
        if report.skipped and isinstance(report.longrepr, tuple):
            reason = str(report.longrepr[2])
        self.tests.append({"nodeid": report.nodeid, "outcome": outcome_of(report), "model": row, "target": target,
                           "check": check, "longrepr": text, "reason": reason or getattr(report, "wasxfail", ""),
                           "duration": round(report.duration, 2)})


def sweep_changes(folder: Path, cells: list[tuple[str, str]]) -> list[str]:
    """The change points per dispatch of a sweep's folder (``pytest-rvv history``'s list) for this run's cells."""
    if not folder.is_dir():
        return []
    shown = set(cells)
    found = [c for c in changes(load_history([folder])) if (c.model, c.target) in shown]
    return change_lines(found)


def dispatch_tables(sections: Sections) -> list[DispatchTable]:
    """Each vectorization-checked cell's dispatch table, from its static and executed records."""
    cells = sorted({(model, target) for model, target, _ in sections.vectorization})
    return [records_table(sections.vectorization, model, target) for model, target in cells]


class RunReport:
    """index.html and results.json of a run (and the GitHub step summary), written from its sections once."""

    def __init__(self, config: pytest.Config, session: RvvSession, directory: Path,
                 reference: Callable[[], RvvSession | None]) -> None:
        self.config, self.session, self.directory, self.reference = config, session, directory, reference

    def write(self, sections: Sections) -> tuple[int, float] | None:
        """Write both files; (bytes of index.html, seconds it took), None when no test had a cell."""
        if not sections.tests:
            return None
        started = time.perf_counter()
        self.directory.mkdir(parents=True, exist_ok=True)
        run = self.run_info()  # probes the tools once, for the page and results.json
        page = self.render(run, sections).encode()
        atomic_write_bytes(self.directory / "index.html", page)
        write_results(self.directory, results(run, [
            {k: t[k] for k in ("nodeid", "outcome", "model", "target", "check")} for t in sections.tests],
            sections.performance, sections.verdicts, dict(self.session.settings.known_targets), sections.lanes,
            sections.kernels, sections.kernel_changes, sections.estimator, sections.peers, dispatch_tables(sections)))
        targets = self.targets(sections)
        grid = [["model", *targets]] + [[model, *(verdict(tests) if (tests := self.cell(sections, model, t)) else ""
                                                   for t in targets)] for model in self.rows(sections)]
        failures = [(t["nodeid"], (t["longrepr"].strip().splitlines() or [""])[0][:200]) for t in sections.tests
                    if t["outcome"] in ("failed", "error")]
        append_step_summary(step_summary(grid, failures))
        return len(page), time.perf_counter() - started

    # what the page shows
    def targets(self, sections: Sections) -> list[str]:
        order = [t.name for t in self.session.settings.targets]
        seen = {t["target"] for t in sections.tests}
        return [t for t in order if t in seen] + sorted(seen - set(order))

    def rows(self, sections: Sections) -> list[str]:
        """The grid's rows: the models in selection order; in a toolchain comparison, most added work first."""
        order = [m.name for m in self.session.settings.models]
        seen = {t["model"] for t in sections.tests}
        rows = [m for m in order if m in seen] + sorted(seen - set(order))
        added: dict[str, float] = {}
        for record in sections.comparisons:
            added[record.model] = max(added.get(record.model, -1.0), record.added)
        return sorted(rows, key=lambda m: -added.get(m, -1.0)) if added else rows

    @staticmethod
    def cell(sections: Sections, model: str, target: str) -> list[dict[str, Any]]:
        """The tests of one model x target, in pipeline order of their checks (not xdist's finishing order)."""
        tests = [t for t in sections.tests if t["model"] == model and t["target"] == target]
        return sorted(tests, key=lambda t: (CHECK_ORDER.index(t["check"]) if t["check"] in CHECK_ORDER
                                            else len(CHECK_ORDER), t["nodeid"]))

    def run_info(self) -> dict[str, Any]:
        session = self.session
        info: dict[str, Any] = {
            "command": "pytest " + shlex.join(self.config.invocation_params.args),
            "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC"),
            "machine": session.machine.as_json(), "machine_text": session.machine.describe(),
        }
        for key, make in (("toolchain", lambda: f"{session.toolchain.compiler_version} ({session.toolchain.origin})"),
                          ("qemu", lambda: f"qemu-riscv64 {session.qemu('riscv64').version_text}"),
                          ("runtime", lambda: session.runtime("riscv64").origin),
                          ("llvm_mca", _llvm_mca)):
            try:
                info[key] = make()
            except RvvError as exc:
                info[key] = f"none ({exc})"
        reference = self.reference()
        if reference is not None:
            info["reference"] = f"{reference.toolchain.compiler_version} ({reference.toolchain.origin})"
        return info

    def render(self, run: dict[str, Any], sections: Sections) -> str:
        from jinja2 import Environment, PackageLoader, select_autoescape

        env = Environment(loader=PackageLoader("pytest_rvv.report", "templates"),
                          autoescape=select_autoescape(["html", "j2"]))
        perf = sections.performance
        vectorization = sections.vectorization
        lanes = sections.lanes
        comparisons = ranked(sections.comparisons)
        compared = {c.key: comparison_status(c) for c in comparisons}
        agreement = sections.agreement
        table = [[c.strip() for c in line.strip("|").split("|")] for line in table_one(perf)] if perf else []
        pairs = sections.pairs
        microkernels = [[c.strip() for c in line.strip("|").split("|")] for line in microkernel_table(perf, pairs)]
        entries = sections.kernels
        kernel_rows = [[c.strip() for c in line.strip("|").split("|")] for line in kernels.dashboard_table(entries)]
        calibrated = [[c.strip() for c in line.strip("|").split("|")]
                      for line in kernels.calibration_table(kernels.calibration(entries))]
        kernel_changes = [[c.strip() for c in line.strip("|").split("|")]
                          for line in kernel_changes_table(sections.kernel_changes)]
        published = studies(sections.peers)
        targets, rows = self.targets(sections), self.rows(sections)
        cells = []
        for model in rows:
            for target in targets:
                tests = self.cell(sections, model, target)
                if not tests:
                    continue
                status = compared.get((model, target))
                cells.append({
                    "model": model, "target": target, "anchor": anchor(model, target), "tests": tests,
                    "verdict": verdict(tests), "badges": badges(tests), "compared": status,
                    # in a comparison a cell is coloured by its comparison verdict, report-only or not
                    "colour": COMPARED_CLASS.get(status, verdict(tests)) if status else verdict(tests),
                    "dispatches": dispatch_table(vectorization, perf.get((model, target)), model, target,
                                                 lanes.get((model, target))),
                    "lanes": (lanes.get((model, target)) or {}).get("total"),
                    "hot": [line[2:] for line in hot_dispatches({(model, target): perf[(model, target)]})]
                    if (model, target) in perf else [],
                    "error": agreement.get((model, target)),
                })
        sweep = self.config.getoption("rvv_history")
        swept = Path(sweep) if sweep else self.session.settings.root / HISTORY_DIR
        shown = [(c["model"], c["target"]) for c in cells]
        trend = history(self.session.settings.root, self.session.settings.root / PERF_BASELINES, shown, swept)
        return env.get_template("index.html.j2").render(history=trend, dispatch_changes=sweep_changes(swept, shown),
            run=run, targets=targets, rows=rows, cells=cells,
            by_key={(c["model"], c["target"]): c for c in cells}, table=table, what_estimates_are=WHAT_IT_IS,
            table_notes=table_one_note(perf) if perf else [],
            microkernels=microkernels, kernel_rows=kernel_rows, calibrated=calibrated,
            calibration_note=kernels.CALIBRATION_NOTE,
            plots=plots(perf, vectorization, lanes, pairs, entries, comparisons),
            comparisons=comparisons, statuses=compared, kernel_changes=kernel_changes,
            compared_class=COMPARED_CLASS, estimator=[[c.strip() for c in line.strip("|").split("|")]
                                                      for line in estimator_table(sections.estimator)],
            peers=[[c.strip() for c in line.strip("|").split("|")] for line in peers_table(sections.peers)],
            peers_gap=[[c.strip() for c in line.strip("|").split("|")] for line in gap_table(gaps(sections.peers))],
            peers_note=PEERS_NOTE, peers_moved=moved_lines(sections.peers, sections.comparisons),
            peers_published=[[c.strip() for c in line.strip("|").split("|")]
                             for line in studies_table(published)], studies_note=STUDIES_NOTE,
            studies_lines=studies_lines(published),
            failures=[t for t in sections.tests if t["outcome"] in ("failed", "error")],
            counts={o: sum(t["outcome"] == o for t in sections.tests) for o in ORDER}, anchor=anchor)


def _llvm_mca() -> str:
    from pytest_rvv.measure.silicon import find_mca, mca_version

    return mca_version(find_mca())


def dispatch_table(vectorization: Records, perf: PerfResult | None,
                   model: str, target: str, lanes: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Per dispatch: static and executed counts, executed vector share, vector registers spilled, lane occupancy and
    estimated cycles (most work first). Occupancy exists only for an RVV target's run with elements counted."""
    table = records_table(vectorization, model, target)
    silicon = perf.silicon if perf is not None else {}
    occupancy = (lanes or {}).get("dispatches") or {}
    rows = []
    for row in table.rows:
        share = round(100 * row.executed_vector / row.executed, 1) if row.executed and row.executed_vector is not None \
            else None
        rows.append({"dispatch": row.name, "static": row.instructions, "static_vector": row.vector,
                     "executed": row.executed, "spilled": row.spilled_registers, "spills_executed": row.executed_spills,
                     "share": share,
                     "lanes": occupancy[row.name]["occupancy_percent"] if row.name in occupancy else None,
                     "ukernels": list(row.ukernels),
                     "cycles": {core: cycles.get(row.name) for core, cycles in silicon.items()}})
    rows.sort(key=lambda r: (-(r["executed"] or 0), -(r["static"] or 0), r["dispatch"]))
    return rows[:DISPATCH_ROWS]


def _png(plt: Any, fig: Any) -> str:
    """The figure as an inline PNG (a data URL), closed."""
    buffer = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buffer, format="png", dpi=80)
    plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode()


def plots(perf: dict[tuple[str, str], PerfResult], vectorization: Records,
          lanes_by_cell: dict[tuple[str, str], dict[str, Any]] | None = None,
          pairs: list[tuple[str, str]] | None = None,
          kernel_entries: list[kernels.KernelEntry] | None = None,
          comparisons: list[ComparisonRecord] | None = None) -> list[tuple[str, str]]:
    """(title, data URL) of the plots a person reads faster than tables, each only when its data exists."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = []
    shares = {(m, t): r.share for (m, t, k), r in vectorization.items() if k == STATIC and r.instructions}
    if shares:
        out.append(("Static vector share per model x target (%)", _bars(plt, shares)))
    if against_rv64gc(perf):  # what holds on silicon: the first plot
        out.insert(0, ("Executed work and estimated speedup vs rv64gc per model (what holds on silicon)",
                       _png(plt, speedup_figure(plt, perf))))
    if pairs and microkernel_table(perf, pairs):
        out.append(("Data-tiled microkernel path / default path: executed work, estimated cycles and wall time",
                    _png(plt, microkernel_figure(plt, perf, pairs))))
    if added := added_by_dispatch(comparisons or [])[:20]:
        fig, ax = plt.subplots(figsize=(8, 0.3 * len(added) + 1))
        ax.barh([name[-70:] for name, _ in added], [n for _, n in added], color="#d9534f")
        ax.invert_yaxis()
        ax.tick_params(labelsize=6)
        ax.set_xlabel("instructions added per run (under test - reference)")
        out.insert(0, ("Toolchain comparison: the dispatches that execute more, most added work first",
                       _png(plt, fig)))
    if kernel_entries:
        out.append((f"Kernels: estimated {kernels.CORE} cycles of each matmul path / the default path",
                    _png(plt, kernels.figure(plt, kernel_entries))))
    occupancy = {cell: lanes["total"]["occupancy_percent"] for cell, lanes in (lanes_by_cell or {}).items()}
    if occupancy:
        out.append(("Lane occupancy per model x RVV target (% of VLMAX filled by executed vector instructions)",
                    _bars(plt, occupancy, line=100)))
    if any(m.startswith("est_cycles@") for r in perf.values() for m in r.metrics):
        out.append(("Emulated time vs estimated silicon time, per model x target (emulation inverts the truth)",
                    _png(plt, silicon_figure(plt, perf))))
    if against_rv64gc(perf):
        out.append(("Emulated speedup vs rv64gc (QEMU time: not silicon time, it inverts the truth for vector code)",
                    _png(plt, emulated_speedup_figure(plt, perf))))
    mixes = {(m, t): r for (m, t, k), r in vectorization.items() if k == EXECUTED and r.dispatches}
    for (model, target), record in sorted(mixes.items())[:6]:
        top = sorted(record.dispatches.items(), key=lambda kv: -kv[1].instructions)[:10]
        fig, ax = plt.subplots(figsize=(7, 2.8))
        names = [k.split("_", 2)[-1][:28] or k for k, _ in top]
        vector = [d.vector for _, d in top]
        scalar = [d.instructions - d.vector for _, d in top]
        ax.barh(names, scalar, label="scalar")
        ax.barh(names, vector, left=scalar, label="vector")
        ax.invert_yaxis()
        ax.tick_params(labelsize=6)
        ax.legend(fontsize="x-small")
        out.append((f"Executed instruction mix of the top dispatches: {model} on {target}", _png(plt, fig)))
    return out


def _bars(plt: Any, values: dict[tuple[str, str], float], line: float | None = None) -> str:
    models = sorted({m for m, _ in values})
    targets = sorted({t for _, t in values})
    fig, ax = plt.subplots(figsize=(max(6, len(models) * 0.8), 3.5))
    width = 0.8 / max(len(targets), 1)
    for i, target in enumerate(targets):
        ax.bar([x + i * width for x in range(len(models))], [values.get((m, target), 0) for m in models], width,
               label=target)
    if line is not None:
        ax.axhline(line, color="grey", linewidth=0.8)
    ax.set_xticks([x + width * (len(targets) - 1) / 2 for x in range(len(models))], models, rotation=30, ha="right")
    ax.legend(fontsize="x-small")
    return _png(plt, fig)
