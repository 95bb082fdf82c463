"""Running one node test on one target, failing in one phase: import, compile, run or mismatch.

Which node tests are expected to fail where, by phase, is kept with every other expected failure
(judge/expectations.py: ``baselines/conformance/<target>.toml``).
"""

from __future__ import annotations

import re
from collections.abc import Collection
from pathlib import Path

from pytest_rvv.base.errors import CompileFailed, ConfigError, ImportFailed, RunFailed
from pytest_rvv.base.toml_files import read_toml
from pytest_rvv.config.targets import Target
from pytest_rvv.conformance.batch import NodeBatches
from pytest_rvv.conformance.node_tests import NodeTest
from pytest_rvv.measure.agreement import compare
from pytest_rvv.model.model import Tolerance
from pytest_rvv.run.recorded import OUTPUTS
from pytest_rvv.run.runner import Runner
from pytest_rvv.session import RvvSession

_CACHE_PATH = re.compile(r"\S*/((?:model|probe)\.mlir:)")
DEFAULT_TOLERANCE = Tolerance(atol=1e-4, rtol=1e-3)


class NodeTestFailure(Exception):
    """A node test failed in ``phase`` (import, compile, run or mismatch)."""

    def __init__(self, phase: str, message: str) -> None:
        super().__init__(f"{phase}: {message}")
        self.phase = phase
        self.message = message

    @property
    def first_line(self) -> str:
        """The message's first line, without cache paths (stable across machines)."""
        line = (self.message.strip().splitlines() or [""])[0]
        return _CACHE_PATH.sub(r"\1", line)[:240]


def run_node_test(session: RvvSession, test: NodeTest, target: Target, runner: Runner | None, workdir: Path,
                  tolerance: Tolerance = DEFAULT_TOLERANCE, batches: NodeBatches | None = None,
                  alone: Collection[str] = ()) -> bool:
    """True when it ran and matched; False when it only compiled (no runtime); NodeTestFailure otherwise.

    ``batches``: compile it as its function of the selection's shared module (conformance/batch.py), unless it is
    in ``alone`` (listed as an expected import or compile failure) or cannot share one; then it compiles alone.

    ValueError: the test's data is not tensors (sequences, optionals), which iree-run-module cannot take.
    """
    inputs, expected = test.load("input"), test.load("output")
    try:
        imported = session.compiler.import_onnx(test.name, test.model, None)
    except ImportFailed as exc:
        raise NodeTestFailure("import", str(exc)) from exc
    artifact = batches.artifact(test, target, alone) if batches is not None else None
    try:
        artifact = artifact or session.compiler.compile(test.name, imported, target)
    except CompileFailed as exc:
        raise NodeTestFailure("compile", str(exc)) from exc
    if runner is None:
        return False
    try:
        if runner.capabilities.recorded:  # emulated: once per content (run/recorded.py)
            outputs = session.runs.run(OUTPUTS, artifact, runner, inputs, len(expected), None).outputs
        else:
            outputs = runner.run(artifact, inputs, workdir, len(expected), session.settings.timeout_s).outputs
    except RunFailed as exc:
        raise NodeTestFailure("run", str(exc)) from exc
    agreement = compare(outputs, expected, tolerance)
    if not agreement.ok:
        raise NodeTestFailure("mismatch", agreement.report().replace("\n", "; "))
    return True


def tolerance_for(root: Path, test: str) -> Tolerance:
    """``baselines/conformance/tolerances.toml``: ``test_name = { atol = ..., rtol = ... }`` overrides."""
    path = root / "baselines" / "conformance" / "tolerances.toml"
    entry = read_toml(path, "fix the file").get(test)
    if entry is None:
        return DEFAULT_TOLERANCE
    if not isinstance(entry, dict) or set(entry) - {"atol", "rtol"}:
        raise ConfigError(f"{path}: {test} must be {{ atol = ..., rtol = ... }}")
    return Tolerance(atol=float(entry.get("atol", DEFAULT_TOLERANCE.atol)),
                     rtol=float(entry.get("rtol", DEFAULT_TOLERANCE.rtol)))
