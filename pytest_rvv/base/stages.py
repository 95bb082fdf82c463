"""Where a session's time goes: wall and CPU time per pipeline stage, and what the cache saved.

Each RvvSession keeps one Stages; the pipeline's steps time themselves (``with stages.time("compile")``)
only when they really work, so a lookup costs nothing here and is counted as a hit; a timed step that found its
result in the store (it counted a hit of its own stage while timed: a traced run kept already) counts as that hit,
not as work, though its time (reading the result back) stays in the stage. CPU time is this
process's plus its waited-for children's (iree-compile, QEMU, llvm-mca run as children). Each test's
report carries its process's change since the previous report, so the controller sums xdist workers.
"""

from __future__ import annotations

import resource
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from pytest_rvv.base.record import Record

HEAVIEST = 5  # cells listed under the profile table
NOTABLE_CPU_S = 0.1  # a cell whose tests worked less than this is not listed (checking a prepared model: ~0.01 s)
ORDER = ("prepare", "onnxruntime", "import", "compile", "analyze", "emulate", "emulate (timed)", "count", "estimate",
         "traffic")


def _cpu_s() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


class Stages:
    """Per stage: [wall s, CPU s, times worked, cache hits] in this process."""

    def __init__(self) -> None:
        self.totals: dict[str, list[float]] = {}
        self._reported: dict[str, list[float]] = {}

    @contextmanager
    def time(self, stage: str) -> Iterator[None]:
        wall, cpu = time.perf_counter(), _cpu_s()
        hits = self.totals.get(stage, [0.0, 0.0, 0, 0])[3]
        try:
            yield
        finally:
            row = self.totals.setdefault(stage, [0.0, 0.0, 0, 0])
            row[0] += time.perf_counter() - wall
            row[1] += _cpu_s() - cpu
            if row[3] == hits:  # else it only looked its result up: the hit is counted already
                row[2] += 1

    def hit(self, stage: str) -> None:
        self.totals.setdefault(stage, [0.0, 0.0, 0, 0])[3] += 1

    def delta(self) -> dict[str, list[float]]:
        """What changed since the last call (attached to a test's report)."""
        change = {}
        for stage, row in self.totals.items():
            before = self._reported.get(stage, [0.0, 0.0, 0, 0])
            diff = [a - b for a, b in zip(row, before, strict=True)]
            if any(diff):
                change[stage] = diff
        self._reported = {stage: list(row) for stage, row in self.totals.items()}
        return change


class StageProfile:
    """Sums every report's stage changes (workers' too); ``--rvv-profile`` (or ``-v``) prints the table."""

    def __init__(self, show: bool) -> None:
        self.show = show
        self.totals: dict[str, list[float]] = {}
        self.cells: dict[str, dict[str, float]] = {}  # cell -> stage -> CPU s of the work its tests did
        self.emulated = 0
        self.looked_up = 0
        self.started = time.time()
        self.busy: dict[str, float] = {}  # worker -> seconds its tests took (setup, call, teardown)
        self.last: dict[str, float] = {}  # worker -> when its last report arrived

    def pytest_sessionstart(self) -> None:
        self.started = time.time()

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        gateway = getattr(getattr(report, "node", None), "gateway", None)  # xdist's worker; None in one process
        worker = str(getattr(gateway, "id", "main"))
        self.busy[worker] = self.busy.get(worker, 0.0) + report.duration
        self.last[worker] = time.time()
        record = Record.of(report)
        change = record.stages
        if not change:
            return
        cell = str(record.stages_cell or report.nodeid)
        for stage, diff in change.items():
            row = self.totals.setdefault(stage, [0.0, 0.0, 0, 0])
            for i, amount in enumerate(diff):
                row[i] += amount
            if diff[2]:  # worked (a lookup is not work)
                spent = self.cells.setdefault(cell, {})
                spent[stage] = spent.get(stage, 0.0) + diff[1]

    def notable(self) -> dict[str, dict[str, float]]:
        return {cell: spent for cell, spent in self.cells.items() if sum(spent.values()) >= NOTABLE_CPU_S}

    def heaviest(self, count: int = HEAVIEST) -> list[str]:
        """The cells whose tests did the most work (CPU s), each with the stages that took it, heaviest first."""
        ranked = sorted(self.notable().items(), key=lambda kv: (-sum(kv[1].values()), kv[0]))[:count]
        return [f"{cell.replace('|', ' x ')}: {sum(spent.values()):.1f} CPU s ("
                + ", ".join(f"{stage} {cpu:.1f}" for stage, cpu in sorted(spent.items(), key=lambda kv: -kv[1])
                            if cpu >= 0.05)
                + ")" for cell, spent in ranked]

    def idle_line(self, ended: float) -> str:
        """How much of the wall time the workers worked, and how long each idled at the end while another still
        worked (a long cell scheduled last leaves a core idle: xdist/scheduling.py orders the heaviest first)."""
        wall = ended - self.started
        if not self.busy or wall <= 0:
            return ""
        capacity = wall * len(self.busy)
        tails = sorted((ended - last for last in self.last.values()), reverse=True)
        return (f"wall {wall:.0f} s on {len(self.busy)} worker(s): tests ran {sum(self.busy.values()):.0f} of "
                f"{capacity:.0f} worker-seconds ({100 * sum(self.busy.values()) / capacity:.0f} %); idle at the end "
                f"while another worked: " + ", ".join(f"{t:.0f} s" for t in tails))

    def lines(self) -> list[str]:
        stages = sorted(self.totals, key=lambda s: (ORDER.index(s) if s in ORDER else len(ORDER), s))
        rows = [("stage", "wall s", "CPU s", "worked", "cache hits")]
        rows += [(s, f"{r[0]:.1f}", f"{r[1]:.1f}", f"{int(r[2])}", f"{int(r[3])}") for s, r in
                 ((s, self.totals[s]) for s in stages)]
        widths = [max(len(row[i]) for row in rows) for i in range(5)]
        return ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths,
                                                                                               strict=True)))
                for row in rows]

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        emulate = self.totals.get("emulate", [0.0, 0.0, 0, 0])
        if emulate[2] or emulate[3]:
            terminalreporter.write_line(f"rvv: emulated runs: {int(emulate[2])} emulated, {int(emulate[3])} looked "
                                        "up by content (--rvv-no-cache emulates them all)")
        if self.show and self.totals:
            terminalreporter.section("rvv profile: where the time went (summed over workers)", sep="-")
            for line in self.lines():
                terminalreporter.write_line(line)
            if idle := self.idle_line(time.time()):
                terminalreporter.write_line(idle)
            if notable := self.notable():
                terminalreporter.write_line(f"heaviest cells (CPU s their tests worked; {len(notable)} of "
                                            f"{len(self.cells)} worked {NOTABLE_CPU_S} s or more):")
                for line in self.heaviest():
                    terminalreporter.write_line(f"  {line}")
