"""A cell's dispatch tables over toolchain versions, and every exact change between neighbouring versions.

A sweep (``pytest-rvv sweep``) leaves ``<dir>/<version>/results.json`` per release; each holds the run's toolchain
identity and a dispatch table per cell (``dispatch_tables``). The metrics of a table are exact (instruction counts,
spills): they do not move without a cause, so every difference between two neighbouring versions is a change point,
with no noise model to smooth a small one away. Versions are ordered by ``packaging`` (``3.13.0rc20261016`` before
``3.13.0``). A cell whose compile or run failed in a version has a gap there, never a change.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

from pytest_rvv.config.targets import BUILTIN_TARGETS, Target
from pytest_rvv.judge.gate import check_gate
from pytest_rvv.measure.dispatch_table import METRICS, Counts, CountsSnapshot, DispatchRow, DispatchTable
from pytest_rvv.measure.matching import match_dispatches, pair_name

SCHEMA = "pytest-rvv-results/1"
_VERSION = re.compile(r"version\s+(\S+)")
Cell = tuple[str, str]  # (model, target)


def release_key(text: str) -> tuple[int, Version | str]:
    """Order of a release or a compiler version line (``IREE compiler version 3.13.0rc20261016 @ 89ece87b``) by
    ``packaging``; text that names no version sorts after every version, by itself."""
    found = _VERSION.search(text)
    token = (found.group(1) if found else text.split("@")[0]).strip()
    try:
        return (0, Version(token))
    except InvalidVersion:
        return (1, text)


@dataclass(frozen=True)
class ToolchainVersion:
    """One version of a sweep: its folder and what made its numbers (IREE, QEMU, llvm-mca, the runtime)."""

    name: str  # the release, as the sweep's folder names it
    compiler: str  # iree-compile's version line, with its commit
    folder: Path
    identity: Mapping[str, str] = field(default_factory=dict)

    @property
    def order(self) -> tuple[int, Version | str]:
        return release_key(self.compiler if "version" in self.compiler else self.name)


@dataclass
class History:
    """Per cell, the dispatch table of each version that measured it, and why the others have none."""

    versions: list[ToolchainVersion]
    tables: dict[Cell, dict[str, DispatchTable]] = field(default_factory=dict)
    gaps: dict[Cell, dict[str, str]] = field(default_factory=dict)  # version -> why the cell has no table there
    notes: list[str] = field(default_factory=list)  # what was left out, one line each

    @property
    def cells(self) -> list[Cell]:
        return sorted(self.tables)

    def series(self, cell: Cell) -> list[tuple[ToolchainVersion, DispatchTable | None]]:
        """Every version in order, with the cell's table (None: a gap)."""
        tables = self.tables.get(cell, {})
        return [(v, tables.get(v.name)) for v in self.versions]


def load(folders: Iterable[Path]) -> History:
    """The history of every ``<folder>/<version>/results.json`` (a results.json given directly counts too).

    Bad input is a note, one line each naming the folder or cell: a file from another schema or without dispatch
    tables, a version made by two compilers or a cell given twice for one version (the first is kept), a cell absent
    from some versions. Several sweeps of one range (other selections) join."""
    notes: list[str] = []
    found: dict[str, ToolchainVersion] = {}
    documents: list[tuple[Path, str, dict[str, Any]]] = []
    for folder in folders:
        if not folder.exists():
            notes.append(f"{folder}: no such folder; left out")
            continue
        files = [folder] if folder.is_file() else sorted(folder.glob("*/results.json")) or (
            [folder / "results.json"] if (folder / "results.json").is_file() else [])
        if not files:
            notes.append(f"{folder}: holds no <version>/results.json (run pytest-rvv sweep into it); left out")
        elif folder.is_dir():  # a version the sweep started and got no results for (its log says why)
            notes += [f"{sub}: version {sub.name} has no results.json (it could not be installed or run); a gap"
                      for sub in sorted(folder.iterdir()) if sub.is_dir() and not (sub / "results.json").is_file()]
        for path in files:
            try:
                document = json.loads(path.read_text())
            except (OSError, ValueError) as exc:
                notes.append(f"{path}: unreadable ({exc}); left out")
                continue
            if not isinstance(document, dict) or document.get("schema") != SCHEMA:
                schema = document.get("schema") if isinstance(document, dict) else None
                notes.append(f"{path}: schema {schema!r}, not {SCHEMA}; left out")
                continue
            run = document.get("run") or {}
            compiler = str(run.get("toolchain") or "").split(" (")[0]
            version = ToolchainVersion(path.parent.name, compiler or path.parent.name, path.parent,
                                       {k: str(run[k]) for k in ("toolchain", "runtime", "qemu", "llvm_mca")
                                        if k in run})
            if "dispatch_tables" not in document:
                notes.append(f"{path}: no dispatch tables (recorded by a pytest-rvv before them, or no "
                             "vectorization test ran); left out")
                continue
            first = found.setdefault(version.name, version)
            if first.compiler != version.compiler:
                notes.append(f"{path}: version {version.name} again, made by {version.compiler} (first: "
                             f"{first.compiler} in {first.folder}); left out")
                continue
            documents.append((path, version.name, document))
    history = History(sorted(found.values(), key=lambda v: v.order), notes=notes)
    for path, name, document in documents:
        for data in document["dispatch_tables"]:
            table = DispatchTable.from_json(data)
            tables = history.tables.setdefault((table.model, table.target), {})
            if name in tables:
                notes.append(f"{path}: a second result for {table.model} on {table.target} at version {name}; "
                             "the first is kept")
                continue
            tables[name] = table
    failed: dict[str, dict[Cell, str]] = {}
    for _, name, document in documents:
        failed.setdefault(name, {}).update({(t.get("model"), t.get("target")): (
            f"its {t.get('check') or 'test'} {str(t.get('outcome')).replace('-', ' ')}")
            for t in document.get("tests", []) if t.get("outcome") in ("failed", "error", "could-not-run")})
    for cell, tables in history.tables.items():
        for version in history.versions:
            if version.name in tables:
                continue
            why = failed.get(version.name, {})
            history.gaps.setdefault(cell, {})[version.name] = why.get(cell, "not in that run")
    for cell, gaps in sorted(history.gaps.items()):
        absent = [v for v, why in gaps.items() if why == "not in that run"]
        if absent:
            history.notes.append(f"{cell[0]} on {cell[1]}: not measured in {', '.join(sorted(absent, key=release_key))}"
                                 "; drawn where it was")
    return history


@dataclass(frozen=True)
class Change:
    """One exact metric of one dispatch that differs between two neighbouring versions of a cell (``before`` or
    ``after`` None: the dispatch appeared or vanished)."""

    model: str
    target: str
    good: str  # the older version
    bad: str  # the newer one
    dispatch: str
    metric: str  # a key of dispatch_table.METRICS, or "dispatch" for one that appeared or vanished
    before: int | None
    after: int | None

    @property
    def added(self) -> int:
        return (self.after or 0) - (self.before or 0)

    def text(self) -> str:
        if self.metric == "dispatch":
            return f"{self.dispatch}: {'new' if self.before is None else 'gone'}"
        percent = f", {percent_text(self.before, self.after or 0)}" if self.before else ""
        return f"{self.dispatch}: {METRICS[self.metric]} {self.before} -> {self.after} ({self.added:+d}{percent})"

    def bisect_line(self) -> str:
        """The command that finds the first release between the two that makes the change."""
        return f"pytest-rvv bisect --good {self.good} --bad {self.bad} -- {selection(self.model, self.target)}"

    def to_json(self) -> dict[str, Any]:
        return {"model": self.model, "target": self.target, "good": self.good, "bad": self.bad,
                "dispatch": self.dispatch, "metric": self.metric, "before": self.before, "after": self.after,
                "added": self.added, "bisect": self.bisect_line()}


def percent_text(before: float, after: float) -> str:
    """``+12.3 %``; a small move with two significant digits (``+0.015 %``), never ``+0.0 %``; ``new`` from 0."""
    if not before:
        return "new"
    percent = 100 * (after - before) / before
    return f"{percent:+.1f} %" if abs(percent) >= 0.1 or percent == 0 else f"{percent:+.2g} %"


_KERNEL = re.compile(r"^mm-(?P<dtype>[\w-]+)-(?P<shape>\d+x\d+x\d+)$")


def selection(model: str, target: str) -> str:
    """The pytest arguments that run one cell's vectorization check: a kernel cell (``mm-<type>-MxKxN``) through
    the kernel suite on its shape, type and matmul path, a model through suites/vectorization."""
    kernel = _KERNEL.match(model)
    if kernel is None:
        return f"suites/vectorization --rvv-models={model} --rvv-targets={target}"
    known = BUILTIN_TARGETS.get(target)
    path = f",{known.path}" if known is not None else ""
    return f"suites/kernels --rvv-kernels={kernel['shape']},{kernel['dtype']}{path} -k still_vectorized"


def row_changes(cell: Cell, good: str, bad: str, before: DispatchTable, after: DispatchTable) -> list[Change]:
    """Every exact difference between two tables of one cell, dispatches matched across renumbering."""
    old, new = before.by_name, after.by_name
    matching = match_dispatches(old, new)
    changes = []
    for a, b in matching.pairs:
        for metric in METRICS:
            if metric == "executed" and old[a].per_call is not None and new[b].per_call is not None:
                continue  # per call and at load say it, apart
            x, y = getattr(old[a], metric), getattr(new[b], metric)
            if x is not None and y is not None and x != y:
                changes.append(Change(*cell, good, bad, pair_name(a, b), metric, x, y))
    changes += [Change(*cell, good, bad, k, "dispatch", None, new[k].work) for k in matching.added]
    changes += [Change(*cell, good, bad, k, "dispatch", old[k].work, None) for k in matching.removed]
    return changes


def changes(history: History) -> list[Change]:
    """Every change point of every cell: each pair of neighbouring versions that measured it (a gap is skipped,
    never a change), ranked within each version interval by added executed work (most first), then the rest."""
    found: list[Change] = []
    for cell in history.cells:
        measured = [(v, t) for v, t in history.series(cell) if t is not None]
        for (v1, t1), (v2, t2) in itertools.pairwise(measured):
            found += row_changes(cell, v1.name, v2.name, t1, t2)
    order = {v.name: i for i, v in enumerate(history.versions)}
    rank = {"per_call": 0, "executed": 0}  # work first, most added first; then the rest
    return sorted(found, key=lambda c: (order.get(c.bad, 0), order.get(c.good, 0), rank.get(c.metric, 1),
                                        -c.added, c.model, c.target, c.dispatch, c.metric))


@dataclass(frozen=True)
class Drift:
    """A cell's executed work in its first and last measured version: gradual creep named even when no single step
    is large."""

    model: str
    target: str
    first: str
    last: str
    before: int
    after: int
    what: str = METRICS["executed"]

    @property
    def percent(self) -> float:
        return 100 * (self.after - self.before) / self.before if self.before else 0.0

    def text(self) -> str:
        moved = f"{self.before} -> {self.after} ({percent_text(self.before, self.after)})" if self.before else \
            f"{self.before} -> {self.after}"
        return f"{self.model} on {self.target}: {self.first} -> {self.last}: {self.what} " + (
            f"{self.before}, unchanged" if self.before == self.after else moved)


def drifts(history: History) -> list[Drift]:
    out = []
    for cell in history.cells:
        measured = [(v, t) for v, t in history.series(cell) if t is not None and t.total("executed") is not None]
        if len(measured) >= 2:
            (v1, t1), (v2, t2) = measured[0], measured[-1]
            metric = "per_call" if all(r.per_call is not None for t in (t1, t2) for r in t.rows) else "executed"
            out.append(Drift(*cell, v1.name, v2.name, t1.total(metric) or 0, t2.total(metric) or 0, METRICS[metric]))
    return sorted(out, key=lambda d: -d.percent)


def as_snapshot(table: DispatchTable) -> CountsSnapshot:
    """A table as the executed counts the vectorization gate judges (judge/gate.py), for the history's verdict: each
    dispatch's work per call where the load was counted, else its counted run, else its static code."""
    def spills(row: DispatchRow) -> int | None:  # the counted run's where it ran, else the object's
        return row.executed_spills if row.executed is not None else row.spilled_registers

    dispatches: dict[str, Counts] = {}
    for row in table.rows:
        work, vector = (row.executed, row.executed_vector) if row.executed is not None else (row.instructions,
                                                                                              row.vector)
        if row.per_call is not None:  # the work of a call; the vector share stays the counted run's
            work = row.per_call
        spilled = spills(row)
        dispatches[row.name] = Counts(work or 0, min(vector or 0, work or 0), bool(vector),
                                      spills={"registers": spilled} if spilled else None)
    total = sum(d.instructions for d in dispatches.values())
    vector = sum(d.vector for d in dispatches.values())
    counted = all(spills(r) is not None for r in table.rows)
    totals = Counts(total, vector, vector > 0,
                    spills={"registers": sum(d.spilled for d in dispatches.values())} if counted else None)
    return CountsSnapshot(totals, round(100 * vector / total, 2) if total else 0.0, dispatches)


def lineage(history: History, cell: Cell) -> dict[str, list[DispatchRow | None]]:
    """Each dispatch of a cell followed through the versions (a renumbered dispatch stays one line), named by its
    latest name: {name: its row in each version, None where absent or a gap}."""
    lines: dict[str, list[DispatchRow | None]] = {}
    previous: dict[str, str] = {}  # name in the last measured version -> line
    last: DispatchTable | None = None
    series = history.series(cell)
    for index, (_, table) in enumerate(series):
        if table is None:
            continue
        carried: dict[str, str] = {}
        if last is not None:
            matching = match_dispatches(last.by_name, table.by_name)
            carried = {b: previous[a] for a, b in matching.pairs}
        for row in table.rows:
            line = carried.get(row.name) or row.name
            while line in lines and lines[line][index] is not None:  # two new dispatches named alike
                line += "'"
            lines.setdefault(line, [None] * len(series))[index] = row
            carried[row.name] = line
        previous, last = carried, table
    renamed: dict[str, list[DispatchRow | None]] = {}
    for rows in lines.values():  # named by the latest name
        latest = next(r.name for r in reversed(rows) if r is not None)
        while latest in renamed:
            latest += "'"
        renamed[latest] = rows
    return renamed


@dataclass(frozen=True)
class Finding:
    """What the gate says about one interval of a cell (or its first-to-last drift, ``drift`` True)."""

    model: str
    target: str
    good: str
    bad: str
    line: str
    regression: bool
    drift: bool = False

    def text(self) -> str:
        kind = "drift " if self.drift else ""
        return f"{self.model} on {self.target}, {kind}{self.good} -> {self.bad}: {self.line}"


def judged(history: History, targets: Mapping[str, Target], added_work: float,
           max_share_drop: float) -> list[Finding]:
    """The vectorization gate (judge/gate.py, as after an upgrade: ``added_work`` percent) over each neighbouring pair
    of measured versions of each cell, and over its first and last: regressions first, then improvements."""
    found: list[Finding] = []
    for cell in history.cells:
        target = targets.get(cell[1])
        if target is None:
            history.notes.append(f"{cell[0]} on {cell[1]}: target unknown to this project; drawn, not judged")
            continue
        measured = [(v, t) for v, t in history.series(cell) if t is not None]
        pairs = list(itertools.pairwise(measured))
        spans = [(pair, False) for pair in pairs] + ([((measured[0], measured[-1]), True)] if len(measured) > 2 else [])
        for ((v1, t1), (v2, t2)), drift in spans:
            result = check_gate(as_snapshot(t1), as_snapshot(t2), target, max_share_drop, work=True,
                                added_work=added_work)
            found += [Finding(*cell, v1.name, v2.name, line, True, drift) for line in result.failures]
            found += [Finding(*cell, v1.name, v2.name, line, False, drift) for line in result.improvements]
    return sorted(found, key=lambda f: not f.regression)
