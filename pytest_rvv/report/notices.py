"""Session notices: faults and options that have no effect, one line each, printed once even under ``-q``.

Lines come from the controller (an unwritable cache or report directory, an option with nothing to act on)
and from test reports (a storage fault hit by a test on any xdist worker: the test errors with its line, the
summary says it once with the number of tests it stopped).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pytest_rvv.base.errors import StorageFault
from pytest_rvv.base.record import Record, leave
from pytest_rvv.base.store import storage_fault


class SessionNotices:
    """Collects notice lines and storage faults; prints each distinct one once in the terminal summary."""

    def __init__(self, compare: str | None = None, comparison_fixture: str = "") -> None:
        self.lines: list[str] = []
        self.comparison_fixture = comparison_fixture
        self.faults: dict[str, int] = {}
        self.compare = compare
        self.compared = False

    def add(self, line: str) -> None:
        if line not in self.lines:
            self.lines.append(line)

    def add_fault(self, fault: StorageFault) -> None:
        """A storage fault found before any test (the same line from a test is then counted, not repeated)."""
        self.faults.setdefault(str(fault), 0)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
        report = yield
        excinfo = call.excinfo
        if report.failed and excinfo is not None and isinstance(excinfo.value, StorageFault):
            leave(report, storage_fault=str(excinfo.value))
        if report.when == "call" and self.comparison_fixture in getattr(item, "fixturenames", ()):
            leave(report, compared=True)
        return report

    @pytest.hookimpl(wrapper=True, trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> Any:
        """Writing reports, baselines or snapshots at the end on a full or read-only disk: one line and a failed run,
        not an internal error (innermost wrapper: the terminal summary still prints, with this line)."""
        try:
            return (yield)
        except (OSError, StorageFault) as exc:
            where = Path(str(getattr(exc, "filename", None) or ".")).parent
            fault = storage_fault(exc, where, "write the report elsewhere (--rvv-report)")
            if fault is None:
                raise
            self.add(f"{fault} (while writing the session's reports and baselines: they are incomplete)")
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
            return None

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        record = Record.of(report)
        if record.storage_fault is not None:
            self.faults[record.storage_fault] = self.faults.get(record.storage_fault, 0) + 1
        self.compared = self.compared or record.compared

    def summary(self) -> list[str]:
        """Every notice, then every storage fault with the number of tests it stopped."""
        lines = list(self.lines)
        for line, count in self.faults.items():
            lines.append(f"{line} ({count} test{'s' if count != 1 else ''} stopped by it)" if count else
                         f"{line} (what it already holds is still used; a test that must write there errors)")
        if self.compare and not self.compared:
            lines.append(f"--rvv-compare={self.compare}: no toolchain comparison was selected, so nothing was "
                         "compared (the comparison tests are suites/performance/test_toolchains.py)")
        return lines

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        for line in self.summary():
            terminalreporter.write_line(f"rvv: {line}", yellow=True, bold=True)
