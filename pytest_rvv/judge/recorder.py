"""The recorder: what ``--update-baselines`` writes from a run's performance records, once, on the controller.

The rules of what goes where (portable and machine-bound metrics, noise kept out of the files) are
judge/baselines.py's and judge/policy.py's; the recorder applies them to the run and says what it wrote.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from pytest_rvv.config.machine import Machine
from pytest_rvv.config.targets import Target
from pytest_rvv.judge.baselines import write_baselines
from pytest_rvv.judge.policy import tolerances
from pytest_rvv.measure.metrics import split
from pytest_rvv.measure.performance import PerfResult

RECORDED, UPDATED, UNCHANGED = "recorded", "updated", "unchanged"  # how each written line starts


class BaselineRecorder:
    """Writes the performance baselines of a run under ``root`` (``baselines/performance``)."""

    def __init__(self, root: Path, machine: Machine, targets: Mapping[str, Target],
                 tolerance_table: Mapping[str, Any] | None) -> None:
        self.root, self.machine, self.targets, self.tolerance_table = root, machine, targets, tolerance_table

    def record(self, records: Iterable[PerfResult]) -> list[str]:
        """Write each record's baseline files; one line per file (``recorded``, ``updated`` or ``unchanged``)."""
        chosen = list(records)
        if not chosen:
            return []
        ratios = tolerances(self.tolerance_table, under_xdist=False)  # the controller's: not widened for workers
        return write_baselines(self.root, chosen, self.machine.as_json(),
                               lambda target, metrics: split(metrics, self.targets[target]), ratios)
