"""``--rvv-bundle=DIR``: at the end of the run, the riscv64 cells its tests ran on (models x targets, kernel cells)
written as a bundle (bundle/writer.py), from the session's own cache: the modules the suites compiled, the inputs
they seeded, the runtime they ran."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pytest_rvv.base.errors import RvvError
from pytest_rvv.base.record import Record
from pytest_rvv.bundle.writer import SAFE_NAME, BundleCell, bundle_bytes, write_bundle
from pytest_rvv.config.targets import RISCV64
from pytest_rvv.session import RvvSession


def bundle_cells(rvv: RvvSession, ran: set[tuple[str, str]]) -> tuple[list[BundleCell], list[str]]:
    """The riscv64 cells among ``ran`` ((model, target) names of the tests that ran) that compile, and one line per
    cell that does not."""
    settings = rvv.settings
    models = {m.name: m for m in settings.models} | {
        c.model.name: c.model for c in (settings.kernels.cells if settings.kernels else ())}
    pairs = [(models[m], settings.known_targets[t]) for m, t in sorted(ran)
             if m in models and t in settings.known_targets and settings.known_targets[t].arch == RISCV64]
    cells, left_out = [], []
    for model, target in pairs:
        if not SAFE_NAME.match(model.name):
            left_out.append(f"{model.name}@{target.name}: a bundle's cell folder takes letters, digits and ._,+- only")
            continue
        try:
            artifact = rvv.artifact(model, target)
            oracle = rvv.oracle(model)
        except RvvError as exc:
            left_out.append(f"{model.name}@{target.name}: {str(exc).splitlines()[0][:200]}")
            continue
        cells.append(BundleCell(model.name, target, artifact.path, artifact.function, tuple(oracle.inputs),
                                len(oracle.outputs)))
    return cells, left_out


class BundleWriter:
    """Writes the bundle once, on the controller, after the last test: the riscv64 cells the run's tests ran on."""

    def __init__(self, rvv: RvvSession, directory: str) -> None:
        self.rvv, self.directory = rvv, Path(directory)
        self.lines: list[str] = []
        self.ran: set[tuple[str, str]] = set()

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if (cell := Record.of(report).cell) is not None:
            self.ran.add((cell[0], cell[1]))

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if hasattr(session.config, "workerinput"):
            return
        cells, left_out = bundle_cells(self.rvv, self.ran)
        if not cells:
            self.lines.append(f"rvv: --rvv-bundle={self.directory}: no riscv64 cell in the selection compiled; "
                              "nothing written (select riscv64 targets with --rvv-targets)")
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
            return
        try:
            runtime = self.rvv.runtime(RISCV64)
            written = write_bundle(self.directory, cells, runtime.executable, runtime.identity,
                                   self.rvv.toolchain.compiler_version, self.rvv.store,
                                   max(self.rvv.settings.perf_repeat, 1))
        except (RvvError, OSError) as exc:
            self.lines.append(f"rvv: --rvv-bundle={self.directory}: not written: {exc}")
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
            return
        size = bundle_bytes(written) / 2**20
        self.lines.append(f"rvv: bundle {written}: {len(cells)} cells, {size:.1f} MiB; on a riscv64 machine run "
                          "'sh run.sh', then judge here: pytest suites/correctness/test_agreement.py "
                          "suites/performance/test_performance.py --rvv-bundle-results=<its results folder> with this "
                          "run's --rvv-targets/--rvv-models")
        self.lines += [f"rvv: bundle leaves out {line}" for line in left_out]

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        for line in self.lines:
            terminalreporter.write_line(line)
