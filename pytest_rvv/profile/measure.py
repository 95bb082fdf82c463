"""Executed-instruction counts of a model on a target, as a measurement the suites use."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_rvv.compare.agreement import compare
from pytest_rvv.model.model import Model
from pytest_rvv.profile.counts import ExecutedCounts, attribute, parse
from pytest_rvv.profile.plugin import build_plugin, check_plugin_support, plugin_option
from pytest_rvv.run.runner import Runner, RunOutcome
from pytest_rvv.session import RvvSession

LANES_PROPERTY = "rvv_lanes"  # a test's lane occupancy per dispatch (elements=on runs), for the report


@dataclass(frozen=True)
class ExecutedMeasurement:
    """One counted run: the raw counts, their attribution per dispatch, and the run itself."""

    counts: ExecutedCounts
    attribution: dict[str, Any]
    outcome: RunOutcome

    def snapshot(self, model: str, target: str) -> dict[str, Any]:
        """The deterministic part (dispatch code only: runtime code is not exactly repeatable)."""
        return {"model": model, "target": target, "totals": self.attribution["dispatch_totals"],
                "dispatches": self.attribution["dispatches"]}


def measure_executed(session: RvvSession, model: Model, runner: Runner, workdir: Path,
                     elements: bool = False) -> ExecutedMeasurement:
    """Run ``model`` once under QEMU with the counting plugin and attribute what executed.

    The counted run's outputs must agree with onnxruntime: counts of a wrong result are refused.
    """
    if runner.qemu is None:
        raise ValueError(f"executed counts need an emulated target, not {runner.target.name}")
    check_plugin_support(runner.qemu)
    plugin = build_plugin(session.store)
    artifact = session.artifact(model, runner.target)
    reference = session.reference(model)
    out = workdir / "executed.txt"
    outcome = runner.run(artifact, reference.inputs, workdir, len(reference.outputs), session.settings.timeout_s,
                         qemu_args=plugin_option(plugin, out, elements))
    agreement = compare(outcome.outputs, reference.outputs, model.tolerance)
    assert agreement.ok, (  # counts of a wrong result are not recorded
        f"{model.name} on {runner.target.name} disagrees with onnxruntime in the counted run\n{agreement.report()}"
    )
    counts = parse(out.read_text(), out)
    return ExecutedMeasurement(counts, attribute(counts, artifact.executables, runner.target.arch), outcome)
