"""The terminal section and ``comparison.md`` of a toolchain comparison: collects each comparison from its test's
report (so it works under xdist) and hands them to the formatters (comparison/report.py, comparison/kernels.py)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from pytest_rvv.base.record import Record
from pytest_rvv.comparison.kernels import KernelChange, kernel_changes, kernel_changes_table
from pytest_rvv.comparison.record import ComparisonRecord
from pytest_rvv.comparison.report import comparison_lines, write_comparison
from pytest_rvv.config.kernels import KernelCell


class ComparisonSummary:
    """Collects comparisons from test reports (controller side) and prints them ranked."""

    def __init__(self, report_dir: str | None = None, kernel_cells: Sequence[KernelCell] = ()) -> None:
        self.records: list[ComparisonRecord] = []
        self.report_dir = report_dir
        self.kernel_cells = kernel_cells

    @property
    def kernels(self) -> list[KernelChange]:
        """The kernel dashboard before/after (comparison/kernels.py), empty without compared kernel cells."""
        return kernel_changes(self.kernel_cells, self.records) if self.kernel_cells else []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "call" and (comparison := Record.of(report).comparison) is not None:
            self.records.append(ComparisonRecord.from_json(comparison))

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if not self.records:
            return
        terminalreporter.section("rvv toolchain comparison (most added work first)", sep="-")
        for line in comparison_lines(self.records):
            terminalreporter.write_line(line)
        table = kernel_changes_table(self.kernels)
        if table:
            terminalreporter.section("rvv kernel dashboard: one call, reference -> under test (most added work first)",
                                     sep="-")
            for line in table:
                terminalreporter.write_line(line)
        if self.report_dir and not hasattr(terminalreporter.config, "workerinput"):
            written = write_comparison(Path(self.report_dir), self.records, table)
            terminalreporter.write_line(f"report: {written}")
