"""The checks the suites perform, as plain functions over an RvvSession."""

from __future__ import annotations

from pathlib import Path

from pytest_rvv.compile.compiler import Artifact
from pytest_rvv.config.targets import Target
from pytest_rvv.measure.agreement import Agreement, compare
from pytest_rvv.model.model import Model
from pytest_rvv.run.recorded import PLAIN
from pytest_rvv.run.runner import Runner
from pytest_rvv.session import RvvSession


def check_compiles(session: RvvSession, model: Model, target: Target) -> Artifact:
    """Compile ``model`` for ``target`` (through the cache); raises CompileFailed."""
    artifact = session.artifact(model, target)
    assert artifact.size_bytes > 0, f"{artifact.path} is empty"
    return artifact


def check_agreement(session: RvvSession, model: Model, runner: Runner, workdir: Path) -> Agreement:
    """Run ``model`` with ``runner`` and assert its outputs agree with onnxruntime's."""
    target = runner.target
    artifact = session.artifact(model, target)
    reference = session.reference(model)
    recorded = session.recorded(PLAIN, model, runner, workdir)  # emulated: once per content, shared with perf
    if recorded is not None:
        outputs, repro = recorded.outputs, recorded.repro
    else:
        outcome = runner.run(artifact, reference.inputs, workdir, len(reference.outputs), session.settings.timeout_s)
        outputs, repro = outcome.outputs, outcome.repro
    agreement = compare(outputs, reference.outputs, model.tolerance, reference.steps)
    assert agreement.ok, (
        f"{model.name} on {target.name} disagrees with onnxruntime\n{agreement.report()}\nrepro: {repro}"
    )
    return agreement
