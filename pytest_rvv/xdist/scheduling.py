"""xdist scheduling by cell, heaviest first: what ``-n auto`` (xdist's ``--dist load``) runs under pytest-rvv.

Every suite's test of one model x target (or ONNX node test x target) reads the same cache entries: the
compile, the plain and the counted run, the estimates. xdist's load scheduling hands tests out in collection
order, file by file, so the performance test of a cell and its executed-vectorization test often ran on two
workers at once, and one of them waited on the other's lock. Measured on a cold run of four models on 2 cores:
the last 35 s one worker idled after waiting out the other's counted run, and over the whole default suite
the CPUs were busy 84 % of a 19 min 31 s cold run.

Here a cell is one xdist work unit (a subclass of xdist's ``LoadScopeScheduling`` whose scope is the cell), and
the units go out heaviest first by ``.test_durations`` (longest processing time first), so the small cells
fill the end of the run instead of one long cell running alone. A test with no recorded duration weighs the
mean of those recorded; with no file every cell weighs the same and the units keep collection order.
Other ``--dist`` modes (``loadfile``, ``worksteal``, ...) are xdist's own and untouched.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from xdist.scheduler import LoadScopeScheduling

from pytest_rvv.xdist.shards import cell_of_nodeid, cell_weights


class CellScheduling(LoadScopeScheduling):
    """xdist's scope scheduling with one scope per cell, the heaviest cells sent first."""

    def __init__(self, config: Any, log: Any, cell: Callable[[str], str], durations: Mapping[str, float]) -> None:
        super().__init__(config, log)
        self._cell = cell
        self._durations = durations
        self._ordered = False

    def _split_scope(self, nodeid: str) -> str:
        return self._cell(nodeid)

    def _assign_work_unit(self, node: Any) -> None:
        if not self._ordered:  # the first assignment, once xdist has built its queue of units from the collection
            self._ordered = True
            units = dict(self.workqueue)
            order = heaviest_first(units, self._durations)
            self.workqueue.clear()
            self.workqueue.update((scope, units[scope]) for scope in order)
        super()._assign_work_unit(node)


def heaviest_first(units: Mapping[str, Iterable[str]], durations: Mapping[str, float]) -> list[str]:
    """Cells by recorded weight, heaviest first; equal weights keep their given (collection) order."""
    weights = cell_weights(((nodeid, cell) for cell, nodeids in units.items() for nodeid in nodeids), durations)
    position = {cell: i for i, cell in enumerate(units)}
    return sorted(units, key=lambda cell: (-weights[cell], position[cell]))


def make_scheduler(config: Any, log: Any, targets: Iterable[str], durations: Mapping[str, float]) -> CellScheduling:
    """The scheduler for a session whose targets are ``targets`` (names, as in test ids)."""
    names = tuple(targets)
    return CellScheduling(config, log, lambda nodeid: cell_of_nodeid(nodeid, names), durations)


def header(durations: Path, recorded: Mapping[str, float]) -> str:
    """The terminal's line for an xdist run: how its tests are handed to the workers."""
    order = (f"heaviest first by {durations} ({len(recorded)} tests recorded)" if recorded
             else f"in collection order (no {durations} to weigh them)")
    return f"rvv: xdist: each model x target cell on one worker, {order}"
