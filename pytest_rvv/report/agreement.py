"""Agreement with onnxruntime: max abs error per model x target, collected from the reports and formatted."""

from __future__ import annotations

import pytest

from pytest_rvv.base.record import Record


class AgreementSummary:
    """Collects (model, target, max abs error) from reports (xdist workers' too)."""

    def __init__(self) -> None:
        self.errors: dict[tuple[str, str], float] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "call":
            agreement = Record.of(report).agreement
            if agreement is not None:
                model, target, max_abs = agreement
                self.errors[(model, target)] = max_abs


def agreement_grid(errors: dict[tuple[str, str], float]) -> list[str]:
    """One row per model, one column per target: the max abs error, "-" where the cell was not run."""
    models = sorted({m for m, _ in errors})
    targets = sorted({t for _, t in errors})
    rows = [["model", *targets]] + [[m, *(f"{errors[(m, t)]:.1e}" if (m, t) in errors else "-"
                                          for t in targets)] for m in models]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows]


def agreement_line(errors: dict[tuple[str, str], float]) -> str:
    """One line: how many cells were compared and the largest error (the grid is -v's)."""
    (model, target), largest = max(errors.items(), key=lambda kv: (kv[1], kv[0]))
    return (f"agreement with onnxruntime: {len(errors)} model x target cell{'s' if len(errors) != 1 else ''}, "
            f"largest max abs error {largest:.1e} ({model} on {target})")
