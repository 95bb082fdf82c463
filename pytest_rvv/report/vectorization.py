"""Vectorization results: collected from the reports, formatted for the terminal (what is not vectorized, what
improved or changed, an upgrade's review)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pytest_rvv.base.record import Record
from pytest_rvv.base.store import atomic_write_bytes
from pytest_rvv.judge.gate import SMALL_DISPATCH_SHARE, delta_text
from pytest_rvv.judge.vectorization import STATIC, Records, VectorizationRecord

SHOWN_PER_CASE = 8
REVIEW_SHOWN = 15


class VectorizationSummary:
    """A pytest plugin object: collects results and lane occupancy from test reports (xdist workers' too)."""

    def __init__(self, rootpath: Path, known_ids: set[str]) -> None:
        self.rootpath = rootpath
        self.known_ids = known_ids  # "<model>-<target>" for every registered model and target
        self.results: Records = {}
        self.snapshot_globs: set[tuple[Path, str]] = set()
        self.broken: dict[Path, bytes] = {}  # damaged snapshot files, as they were
        self.lanes: dict[tuple[str, str], dict[str, Any]] = {}  # lane occupancy of counted runs, per cell

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """Put back a damaged snapshot file if anything removed or changed it during the run.

        A safety net only: check_vectorization keeps a damaged file in syrupy's "used" set, so syrupy
        neither reports it unused nor deletes it (tests/test_vectorization_suite.py checks that the file
        is never written, this included).
        """
        for path, data in self.broken.items():
            if not path.exists() or path.read_bytes() != data:
                atomic_write_bytes(path, data)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when != "call":
            return
        record = Record.of(report)
        if record.broken_snapshot is not None:
            path, data = record.broken_snapshot
            self.broken[Path(path)] = bytes.fromhex(data)
        if record.vectorization is not None:
            value = VectorizationRecord.from_json(record.vectorization)
            self.results[(value.model, value.target, value.kind)] = value
            module = self.rootpath / report.location[0]
            function = report.location[2].split("[")[0]
            self.snapshot_globs.add((module.parent / "__snapshots__" / module.stem, function))
        if record.lanes is not None and record.cell is not None:
            self.lanes[(record.cell[0], record.cell[1])] = record.lanes

    def unused_snapshots(self) -> list[Path]:
        """Snapshot files of these tests whose model or target is no longer registered.

        (syrupy's own unused-snapshot report does not cover single-file snapshots of a test when
        paths are given on the command line, which is how the suites are run.)
        """
        stale = []
        for folder, function in sorted(self.snapshot_globs):
            for path in sorted(folder.glob(f"{function}[[]*[]].json")):
                if path.stem[len(function) + 1:-1] not in self.known_ids:
                    stale.append(path)
        return stale

    def review_lines(self) -> list[str]:
        """An upgrade review (see ``review_lines``)."""
        return review_lines(self.results)


def cell_lines(results: Records, changed_only: bool = False) -> list[str]:
    """Per model x target x kind: its vector share, then what is not vectorized, what improved and what changed.

    ``changed_only``: only the results with an improvement or a change, and only those details (a quiet run's
    summary)."""
    out: list[str] = []
    for (model, target, kind), r in sorted(results.items()):
        if changed_only and not r.changed:
            continue
        what = "static instructions" if kind == STATIC else "instructions executed in dispatches"
        head = f"{model} @ {target}: {r.vector}/{r.instructions} {what} vector ({r.share:.1f}%)"
        details = []
        missing = r.not_vectorized
        if missing and not changed_only:
            shown = ", ".join(missing[:SHOWN_PER_CASE])
            more = f" and {len(missing) - SHOWN_PER_CASE} more" if len(missing) > SHOWN_PER_CASE else ""
            details.append(f"    not vectorized ({len(missing)}): {shown}{more}")
        spilling = {k: d.spills for k, d in r.dispatches.items() if d.spills}
        if spilling and not changed_only:
            verb = "stored" if kind == STATIC else "moved"
            shown = ", ".join(f"{k} ({n})" for k, n in sorted(spilling.items(), key=lambda kv: -kv[1])[:SHOWN_PER_CASE])
            more = f" and {len(spilling) - SHOWN_PER_CASE} more" if len(spilling) > SHOWN_PER_CASE else ""
            details.append(f"    spills vector registers in {len(spilling)} of {len(r.dispatches)} dispatches "
                           f"({sum(spilling.values())} registers {verb}): {shown}{more}")
        details += [f"    improvement: {line}" for line in r.improvements]
        details += [f"    change: {line}" for line in r.changes[:SHOWN_PER_CASE]]
        out += [head, *details]
    return out


def unused_lines(paths: list[Path]) -> list[str]:
    return [f"unused snapshot (its model or target is not registered): {path}" for path in paths]


def review_lines(results: Records) -> list[str]:
    """An upgrade review: executed work per dispatch ranked by what it adds, sizes, then churn in one line."""
    upgraded = {k: r for k, r in results.items() if r.upgrade}
    if not upgraded:
        return []
    toolchains = sorted({r.upgrade for r in upgraded.values() if r.upgrade})
    out = [f"recorded with {before}; now {now}" for before, now in toolchains]
    moves = sorted(((after - before, before, after, model, target, dispatch)
                    for (model, target, kind), r in upgraded.items() if kind == "executed"
                    for dispatch, before, after in r.work), reverse=True)
    added = [m for m in moves if m[0] > 0]
    removed = [m for m in reversed(moves) if m[0] < 0]
    for title, chosen in (("work added (instructions executed per dispatch, most added first)", added),
                          ("work removed", removed)):
        if chosen:
            out.append(f"{title}:")
            out += [f"  {model} @ {target} {dispatch}: {before} -> {after} ({delta_text(before, after)})"
                    for _, before, after, model, target, dispatch in chosen[:REVIEW_SHOWN]]
            if len(chosen) > REVIEW_SHOWN:
                out.append(f"  ... and {len(chosen) - REVIEW_SHOWN} more")
    sizes = [(model, target, r) for (model, target, kind), r in sorted(upgraded.items())
             if kind == STATIC and r.resized]
    if sizes:
        out.append("code size (static instructions per model):")
        out += [f"  {model} @ {target} {r.recorded_totals.text() if r.recorded_totals else ''} -> "
                f"{r.vector} vector of {r.instructions} instructions" for model, target, r in sizes]
    churn = sum(r.churn for r in upgraded.values())
    out.append(f"churn: {churn} dispatch moves within the --rvv-added-work threshold (or under "
               f"{SMALL_DISPATCH_SHARE:.1%} of their model's work); vector share is shown above as a diagnostic")
    return out
