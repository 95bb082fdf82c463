"""How many emulated runs a session really emulated and how many it looked up by content (run/recorded.py).

Each test's report carries its process's counts since the previous report, so the controller can sum
them under xdist; the terminal summary prints one line.
"""

from __future__ import annotations

from typing import Any

import pytest

RUNS_PROPERTY = "rvv_runs"


class RunTally:
    """Sums (emulated, looked up) over every test report, workers' included."""

    def __init__(self) -> None:
        self.emulated = 0
        self.looked_up = 0

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        for name, value in report.user_properties:
            if name == RUNS_PROPERTY:
                self.emulated += value[0]
                self.looked_up += value[1]

    def line(self) -> str:
        return (f"rvv: emulated runs: {self.emulated} emulated, {self.looked_up} looked up by content "
                "(--rvv-no-cache emulates them all)")

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.emulated or self.looked_up:
            terminalreporter.write_line(self.line())


class RunCounter:
    """Per process: the counts of a RecordedRuns since the last report."""

    def __init__(self) -> None:
        self.seen = (0, 0)

    def delta(self, emulated: int, looked_up: int) -> tuple[int, int] | None:
        before, self.seen = self.seen, (emulated, looked_up)
        change = (emulated - before[0], looked_up - before[1])
        return change if any(change) else None
