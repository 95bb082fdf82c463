"""Per-target conformance summary, and the controller's rewrite of the expected-failure lists."""

from __future__ import annotations

from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest

from pytest_rvv.base.record import Record
from pytest_rvv.judge.expectations import (
    NEW_PASS,
    NODE_PHASES,
    ExpectedNodeFailure,
    load_node_lists,
    node_lists_path,
    write_node_lists,
)


class ConformanceTracker:
    """pytest plugin object: counts outcomes from reports (xdist workers' too), prints, updates once."""

    def __init__(self, config: pytest.Config, root: Path) -> None:
        self.config = config
        self.root = root
        self.outcomes: dict[str, dict[str, tuple[str | None, str, bool]]] = defaultdict(dict)
        self.verdicts: dict[str, Counter[str]] = defaultdict(Counter)
        self.changes: list[str] = []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when != "call":
            return
        outcome = Record.of(report).conformance
        if outcome is None:
            return
        target, test, phase, message, ran = outcome
        self.outcomes[target][test] = (phase, message, ran)
        if phase is None:
            listed = message == NEW_PASS or not report.passed
            verdict = "new pass (listed)" if listed else ("passed" if ran else "compiled only")
        else:
            verdict = f"expected {phase} failure" if hasattr(report, "wasxfail") else f"new {phase} failure"
        self.verdicts[target][verdict] += 1

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if hasattr(self.config, "workerinput") or not self.config.getoption("update_baselines"):
            return
        for target, outcomes in sorted(self.outcomes.items()):
            path = node_lists_path(self.root, target)
            entries = load_node_lists(path)
            before = dict(entries)
            for test, (phase, message, ran) in outcomes.items():
                if phase is not None:
                    entries[test] = ExpectedNodeFailure(phase, message)
                elif test in entries and (ran or entries[test].phase in ("import", "compile")):
                    del entries[test]
            if entries != before:
                write_node_lists(path, entries)
                added, removed = len(set(entries) - set(before)), len(set(before) - set(entries))
                self.changes.append(f"{path}: {len(entries)} expected failures ({added} added, {removed} removed)")

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if not self.verdicts:
            return
        terminalreporter.section("rvv ONNX conformance", sep="-")
        order = ["passed", "compiled only", *(f"expected {p} failure" for p in NODE_PHASES),
                 *(f"new {p} failure" for p in NODE_PHASES), "new pass (listed)"]
        alike: dict[tuple[tuple[str, int], ...], list[str]] = {}  # targets with the same counts share a line
        for target, counts in sorted(self.verdicts.items()):
            alike.setdefault(tuple((v, counts[v]) for v in order if counts[v]), []).append(target)
        for counted, targets in alike.items():
            total = sum(n for _, n in counted)
            parts = ", ".join(f"{n} {v}" for v, n in counted)
            each = " each" if len(targets) > 1 else ""
            terminalreporter.write_line(f"{', '.join(targets)}: {total} tests{each}: {parts}")
        for line in self.changes:
            terminalreporter.write_line(line)
        if any(counts["new pass (listed)"] for counts in self.verdicts.values()):
            terminalreporter.write_line("new passes are improvements: record them with --update-baselines "
                                        "(--rvv-strict-baselines fails on them)")
