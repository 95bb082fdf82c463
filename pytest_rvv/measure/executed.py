"""Executed-instruction counts of a model on a target, as a measurement the suites use."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_rvv.base.store import content_sha, digest, source_digest
from pytest_rvv.measure import counts as counts_module
from pytest_rvv.measure.agreement import CheckedRun, compare
from pytest_rvv.measure.counts import ExecutedCounts, attribute, parse
from pytest_rvv.measure.dispatch_table import Attribution, CountsSnapshot
from pytest_rvv.measure.static import ukernels_by_dispatch
from pytest_rvv.measure.traffic import trace_before_counting
from pytest_rvv.run.recorded import COUNTED, ELEMENTS, LOADED, RecordedRun
from pytest_rvv.session import Cell

_COUNTS_SOURCE = source_digest(counts_module.__file__, "spills.py")  # a change to the attribution re-runs it



@dataclass(frozen=True)
class ExecutedMeasurement:
    """One counted run: its attribution per dispatch, the run itself, and its raw counts (parsed when first asked
    for: a rerun whose attribution and estimates are in the store never parses them)."""

    attribution: Attribution
    run: RecordedRun  # the counted run (fresh, or looked up by content)
    parsed: Callable[[], ExecutedCounts] = field(repr=False, compare=False)  # the run's counts, parsed once
    ukernels: dict[str, list[str]] = field(default_factory=dict)  # dispatch -> microkernels inlined into it
    checked: CheckedRun | None = None  # the counted run's outputs against onnxruntime's (judge/ refuses a wrong one)

    @property
    def counts(self) -> ExecutedCounts:
        """The raw counts of the run's blocks (measure/counts.py)."""
        return self.parsed()

    @property
    def per_dispatch(self) -> dict[str, int]:
        """Instructions executed per dispatch (those that executed any)."""
        return {k: d.instructions for k, d in self.attribution.dispatches.items() if d.instructions}

    def per_call(self, load: ExecutedMeasurement) -> dict[str, tuple[int, int]]:
        """What one call executes per dispatch, (instructions, vector instructions): this counted run less ``load``,
        the counted run of the module's load alone (``measure_one_time``), dispatch by dispatch."""
        once = load.attribution.dispatches
        return {k: (d.instructions - (once[k].instructions if k in once else 0),
                    d.vector - (once[k].vector if k in once else 0)) for k, d in self.attribution.dispatches.items()}

    @property
    def counted(self) -> CountsSnapshot:
        """The dispatch code's counts, each dispatch with the microkernels inlined into it."""
        return self.attribution.with_ukernels(self.ukernels)

    def snapshot(self, model: str, target: str) -> dict[str, Any]:
        """The deterministic part (dispatch code only: runtime code is not exactly repeatable)."""
        return self.attribution.snapshot(model, target, self.ukernels)


def measure_executed(cell: Cell, workdir: Path, elements: bool = False,
                     traced_on: str | None = None) -> ExecutedMeasurement:
    """Run the cell's module once under QEMU with the counting plugin and attribute what executed.

    The counted run's outputs are held against onnxruntime's (``checked``): judge/ refuses counts of a wrong result.
    ``traced_on``: the core whose memory traffic this cell will be measured on: its traced run is made first and
    counts too (measure/traffic.py ``trace_before_counting``), one emulation for both.
    """
    runner, oracle = cell.given()
    model, artifact = cell.model, cell.artifact
    if not runner.capabilities.counted:
        raise ValueError(f"executed counts need an emulated target, not {runner.target.name}")
    if traced_on is not None and not elements:
        trace_before_counting(cell, workdir / "traced", traced_on)
    recorded = cell.recorded(ELEMENTS if elements else COUNTED, workdir)  # once per content
    assert recorded is not None and recorded.counts is not None
    agreement = compare(recorded.outputs, oracle.outputs, model.tolerance, oracle.steps)
    checked = CheckedRun(model.name, runner.target.name, agreement, " in the counted run")
    counts = _parser(recorded)
    return ExecutedMeasurement(attributed(cell, counts, recorded, artifact.executables, runner.target.arch),
                               recorded, counts, ukernels_by_dispatch(artifact), checked)


def measure_one_time(cell: Cell, workdir: Path) -> ExecutedMeasurement:
    """What the dispatches execute while the module loads (its initializers: encoding or packing constant weights,
    hoisted constant work), from a counted run that stops before the call (``LOADED``): what a call executes is the
    counted run's count minus this, dispatch by dispatch."""
    runner, _ = cell.given()
    if not runner.capabilities.counted:
        raise ValueError(f"executed counts need an emulated target, not {runner.target.name}")
    recorded = cell.recorded(LOADED, workdir)
    assert recorded is not None and recorded.counts is not None
    counts = _parser(recorded)
    return ExecutedMeasurement(attributed(cell, counts, recorded, cell.artifact.executables, runner.target.arch),
                               recorded, counts)


def _parser(recorded: RecordedRun) -> Callable[[], ExecutedCounts]:
    """The run's counts, parsed when first asked for and then kept."""
    path = recorded.counts
    assert path is not None
    return functools.cache(lambda: parse(path.read_text(), path))


def attributed(cell: Cell, counts: Callable[[], ExecutedCounts], recorded: RecordedRun,
               executables: tuple[Path, ...], arch: str) -> Attribution:
    """``attribute`` (disassembly and DWARF of every dispatch library, a walk over every executed block), done
    once per counts file and libraries and kept in the store: a rerun with nothing changed reads it back."""
    assert recorded.counts is not None
    key = digest(["attribution-v1", content_sha(recorded.counts), *(content_sha(e) for e in executables), arch,
                  _COUNTS_SOURCE])

    def build(tmp: Path) -> dict[str, Any]:
        with cell.stages.time("count"):
            (tmp / "attribution.json").write_text(json.dumps(attribute(counts(), executables, arch).to_json(),
                                                                    sort_keys=True))
        return {"arch": arch}

    entry = cell.store.get_or_build("attributions", key, build)
    if not entry.created:
        cell.stages.hit("count")
    return Attribution.from_json(json.loads(entry.file("attribution.json").read_text()))
