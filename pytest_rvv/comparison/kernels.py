"""The kernel dashboard before and after (``--rvv-compare`` over suites/kernels): per row x shape x path, the work
of one call with the reference and with the toolchain under test, the path's ratio to the default path on both, and
the comparison's verdict, most added work first.

Only arranges what comparison/ab.py decided and measured (each comparison's ``per_call``, recorded on its report).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pytest_rvv.comparison.record import ComparisonRecord, PerCall
from pytest_rvv.comparison.report import comparison_status
from pytest_rvv.config.kernels import CORE, KernelCell
from pytest_rvv.config.paths import DEFAULT, PATHS
from pytest_rvv.measure.metrics import ratio


def _added(before: float | None, after: float | None) -> float | None:
    """Added work in percent; None without both sides' figures, infinite for work from nothing."""
    if before is None or after is None:
        return None
    return round(100 * (after - before) / before, 2) if before else (math.inf if after else 0.0)


@dataclass(frozen=True)
class KernelChange:
    """One compared kernel cell's call, (reference, under test): executed instructions, est. cycles on ``core``, the
    path / default est. ratio, modelled DRAM bytes where both sides were traced, the added work in percent and the
    verdict (results.json's ``kernels.comparison``, ``to_json``)."""

    row: str
    shape: str
    path: str
    target: str
    model: str
    status: str
    executed: tuple[int | None, int | None]
    est_cycles: tuple[float | None, float | None]
    core: str
    added_percent: float | None
    notes: tuple[str, ...]
    dram_bytes: tuple[int, int] | None = None
    vs_default: tuple[float | None, float | None] = (None, None)

    def to_json(self) -> dict[str, Any]:
        entry = {"row": self.row, "shape": self.shape, "path": self.path, "target": self.target, "model": self.model,
                 "status": self.status, "executed": list(self.executed), "est_cycles": list(self.est_cycles),
                 "core": self.core, "added_percent": self.added_percent, "notes": list(self.notes)}
        return entry | ({"dram_bytes": list(self.dram_bytes)} if self.dram_bytes else {}) | {
            "vs_default": list(self.vs_default)}


def kernel_changes(cells: Sequence[KernelCell], records: list[ComparisonRecord]) -> list[KernelChange]:
    """One entry per compared kernel cell, ranked: most added work per call (executed) first."""
    by_cell = {r.key: r for r in records}
    entries = []
    for cell in cells:
        record = by_cell.get((cell.model.name, cell.target.name))
        if record is None:
            continue
        per_call = record.per_call or PerCall()  # none: one side could not compile or run it (the notes say)
        executed: tuple[int | None, int | None] = per_call.executed or (None, None)
        entries.append(KernelChange(cell.row, cell.shape.name, cell.path, cell.target.name, cell.model.name,
                                    comparison_status(record), executed, per_call.cycles.get(CORE) or (None, None),
                                    CORE, _added(*executed), record.notes[:1], per_call.dram_bytes))
    defaults = {(e.row, e.shape): e for e in entries if e.path == DEFAULT}
    entries = [e if (base := defaults.get((e.row, e.shape))) is None else dataclasses.replace(
        e, vs_default=(ratio(e.est_cycles[0], base.est_cycles[0]), ratio(e.est_cycles[1], base.est_cycles[1])))
        for e in entries]
    order = {name: i for i, name in enumerate(PATHS)}
    return sorted(entries, key=lambda e: (e.added_percent is None, -(e.added_percent or 0), e.row, e.shape,
                                          order.get(e.path, 0)))


def _pair(values: Sequence[float | None], scale: float, digits: int) -> str:
    if None in values:
        return "-"
    before, after = values
    assert before is not None and after is not None
    change = f" ({100 * (after - before) / before:+.1f} %)" if before else ""
    return f"{before / scale:.{digits}f} -> {after / scale:.{digits}f}{change}"


def kernel_changes_table(entries: list[KernelChange]) -> list[str]:
    """Markdown, most added work per call first: the verdict, executed k instructions and est. Mcycles per call,
    reference -> under test, the path / default ratio on both sides, and the modelled DRAM KiB per call."""
    if not entries:
        return []
    lines = ["| Verdict | Row | Shape | Path | Executed per call (k), reference -> under test | "
             f"Est. {CORE} Mcycles per call | Path / default est., reference -> under test | "
             f"DRAM KiB per call ({CORE} caches) |",
             "|---|---|---|---|---|---|---|---|"]
    for e in entries:
        was, now = e.vs_default
        ratios = "-" if was is None or now is None else f"{was:.2f}x -> {now:.2f}x"
        executed = _pair(e.executed, 1e3, 1) if None not in e.executed else "; ".join(e.notes) or "-"
        lines.append(f"| {e.status} | {e.row} | {e.shape} | {e.path} | {executed} | "
                     f"{_pair(e.est_cycles, 1e6, 3)} | {ratios} | {_pair(e.dram_bytes or (None,), 1024, 1)} |")
    return lines
