"""The checks the suites perform, as plain functions over a session (compiling) or a resolved cell (running); each
returns a verdict (judge/outcome.py), which the suites hand to ``rvv_judge``."""

from __future__ import annotations

from pathlib import Path

from pytest_rvv.config.targets import Target
from pytest_rvv.judge.outcome import FAILED, Verdict, failed, passed
from pytest_rvv.measure.agreement import CheckedRun, measure_agreement
from pytest_rvv.model.model import Model
from pytest_rvv.session import Cell, RvvSession

AGREEMENT = "agreement"  # the phase of a disagreement (judge/expectations.py PHASES: its expected failures accept it)


def check_compiles(session: RvvSession, model: Model, target: Target) -> Verdict:
    """Compile ``model`` for ``target`` (through the cache; raises CompileFailed): fails on an empty module."""
    artifact = session.artifact(model, target)
    return passed() if artifact.size_bytes > 0 else failed(f"{artifact.path} is empty")


def agreement_verdict(checked: CheckedRun | None) -> Verdict:
    """A run whose outputs disagree with onnxruntime's fails (and its numbers are refused), in phase agreement; None:
    no run disagreed."""
    if checked is None or checked.agreement.ok:
        return passed()
    repro = f"\nrepro: {checked.repro}" if checked.repro is not None else ""
    return Verdict(FAILED, f"{checked.model} on {checked.target} disagrees with onnxruntime{checked.run}\n"
                           f"{checked.agreement.report()}{repro}", phase=AGREEMENT)


def check_agreement(cell: Cell, workdir: Path) -> Verdict:
    """Run the cell's module and hold its outputs against onnxruntime's; records the largest error when they agree."""
    checked = measure_agreement(cell, workdir)
    verdict = agreement_verdict(checked)
    if verdict.failed:
        return verdict
    return passed(agreement=(checked.model, checked.target, checked.agreement.max_abs))
