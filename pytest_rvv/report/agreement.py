"""The terminal grid of agreement with onnxruntime: max abs error per model x target."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_rvv.base.record import Record


class AgreementSummary:
    """Collects (model, target, max abs error) from reports (xdist workers' too) and prints one grid."""

    def __init__(self) -> None:
        self.errors: dict[tuple[str, str], float] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "call":
            agreement = Record.of(report).agreement
            if agreement is not None:
                model, target, max_abs = agreement
                self.errors[(model, target)] = max_abs

    def lines(self) -> list[str]:
        models = sorted({m for m, _ in self.errors})
        targets = sorted({t for _, t in self.errors})
        rows = [["model", *targets]] + [[m, *(f"{self.errors[(m, t)]:.1e}" if (m, t) in self.errors else "-"
                                              for t in targets)] for m in models]
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        return ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows]

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.errors:
            terminalreporter.section("rvv agreement with onnxruntime (max abs error)", sep="-")
            for line in self.lines():
                terminalreporter.write_line(line)
