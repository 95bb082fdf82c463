"""The checks the suites perform, as plain functions over a session (compiling) or a resolved cell (running)."""

from __future__ import annotations

from pathlib import Path

from pytest_rvv.compile.compiler import Artifact
from pytest_rvv.config.targets import Target
from pytest_rvv.measure.agreement import Agreement, compare
from pytest_rvv.model.model import Model
from pytest_rvv.run.recorded import PLAIN
from pytest_rvv.session import Cell, RvvSession


def check_compiles(session: RvvSession, model: Model, target: Target) -> Artifact:
    """Compile ``model`` for ``target`` (through the cache); raises CompileFailed."""
    artifact = session.artifact(model, target)
    assert artifact.size_bytes > 0, f"{artifact.path} is empty"
    return artifact


def check_agreement(cell: Cell, workdir: Path) -> Agreement:
    """Run the cell's module and assert its outputs agree with onnxruntime's."""
    runner, oracle = cell.given()
    model, target = cell.model, cell.target
    recorded = cell.recorded(PLAIN, workdir)  # emulated: once per content, shared with perf
    if recorded is not None:
        outputs, repro = recorded.outputs, recorded.repro
    else:
        outcome = runner.run(cell.artifact, oracle.inputs, workdir, len(oracle.outputs), cell.timeout_s)
        outputs, repro = outcome.outputs, outcome.repro
    agreement = compare(outputs, oracle.outputs, model.tolerance, oracle.steps)
    assert agreement.ok, (
        f"{model.name} on {target.name} disagrees with onnxruntime\n{agreement.report()}\nrepro: {repro}"
    )
    return agreement
