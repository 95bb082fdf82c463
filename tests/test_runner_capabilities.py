"""A runner says what it can do (``Runner.capabilities``: run/runner.py), and measuring code asks that, never the
runner's class: each runner kind declares its own, and a new kind (a runner with N threads under the same QEMU, one
that replays rounds) is measured by what it declares. Through the real iree-compile, QEMU and runtimes."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import numpy as np
import pytest

from pytest_rvv.base.errors import RuntimeNotProvided
from pytest_rvv.base.store import Store
from pytest_rvv.compile.compiler import Artifact
from pytest_rvv.config.boards import Board
from pytest_rvv.config.settings import Settings
from pytest_rvv.config.targets import BUILTIN_TARGETS
from pytest_rvv.measure.performance import measure_performance
from pytest_rvv.run.bundle_results import BundleResults, MachineFacts, ResultsRunner
from pytest_rvv.run.qemu import find_qemu
from pytest_rvv.run.runner import Capabilities, Runner, RunOutcome
from pytest_rvv.run.ssh_board import BoardFacts, BoardLink, BoardRunner
from pytest_rvv.session import RvvSession
from pytest_rvv.toolchain.runtimes import Runtime

from .conftest import SUITE_COPY_IGNORE, SUITES, USER_CACHE, mlp_model

VECTOR = BUILTIN_TARGETS["rv64gcv-zvl256b"]
HOST = BUILTIN_TARGETS["host"]


def runtime(arch: str) -> Runtime:
    return Runtime(arch, Path("/nonexistent/iree-run-module"), None, "a runtime never run here")


def test_each_runner_kind_declares_what_it_can_do(tmp_path):
    qemu = find_qemu("riscv64")
    under_qemu = Runner(VECTOR, runtime("riscv64"), qemu).capabilities
    assert under_qemu == Capabilities(f"under qemu-riscv64 {qemu.version_text} -cpu {VECTOR.emulator_cpu}",
                                      emulated=True, counted=True)
    assert under_qemu.recorded and under_qemu.threads == 1

    host = Runner(HOST, runtime(HOST.arch), None).capabilities
    assert host == Capabilities("natively") and not host.recorded

    board = Board("a", "user@board")
    facts = BoardFacts(vector=True, vlen=256, isa="rv64imafdcv", kernel="6.6", gnu_time=True, perf=False)
    on_board = BoardRunner(VECTOR, runtime("riscv64"), BoardLink(board, tmp_path, Store(tmp_path)), facts)
    assert on_board.capabilities == Capabilities("on board a")
    assert not on_board.capabilities.recorded

    machine = MachineFacts({"uarch": "spacemit,x60", "harts": "8", "vlen": "256", "isa": "rv64gcv"})
    results = BundleResults(tmp_path / "results", {"runtime": "3.13.0"}, machine)
    replayed = ResultsRunner(VECTOR, results).capabilities
    assert replayed == Capabilities(f"on spacemit-x60-8h-vlen256 (bundle results {tmp_path / 'results'})",
                                    replays=True, core=machine.core)
    assert replayed.core is not None and replayed.core.name == "spacemit-x60"
    assert not replayed.recorded and not replayed.counted


class Threaded(Runner):
    """The same QEMU and runtime, declared as running with four threads (so it runs with ``--device=local-task``):
    its runs are neither counted nor recorded by content."""

    @property
    def capabilities(self) -> Capabilities:
        return Capabilities(f"with 4 threads {super().capabilities.where}", emulated=True, threads=4)


class Replaying(Runner):
    """A host runner declaring it replays rounds: two real runs of the module in ``workdir``, made when asked."""

    def __init__(self, runner: Runner, workdir: Path) -> None:
        super().__init__(runner.target, runner.runtime, None)
        self.workdir = workdir

    @property
    def capabilities(self) -> Capabilities:
        return Capabilities("replaying two rounds run on the host", replays=True)

    def replay(self, artifact: Artifact, inputs: list[np.ndarray], num_outputs: int,
               limit: int | None = None) -> list[RunOutcome]:
        rounds = [self.run(artifact, inputs, self.workdir / f"round_{i}", num_outputs, 120.0) for i in range(2)]
        return rounds[:limit]


@pytest.fixture
def rvv(tmp_path) -> tuple[RvvSession, object]:
    """A session on the shared cache, and the mlp model."""
    mlp_model(tmp_path / "mlp.onnx")
    table = {"models": {"mlp": {"path": "mlp.onnx", "inputs": [{"name": "x", "shape": [4, 64]}]}}}
    settings = dataclasses.replace(Settings.resolve(lambda option: None, table, tmp_path), cache_dir=USER_CACHE)
    return RvvSession(settings), settings.known_models["mlp"]


def test_rounds_are_replayed_when_the_runner_says_it_replays_them_whatever_its_class(rvv, tmp_path):
    session, model = rvv
    runner = Replaying(session.runner(HOST), tmp_path)
    result = measure_performance(session.cell(model, HOST, runner), repeat=5, timed=True)
    assert len(result.samples["wall_s"]) == 2  # its two rounds, not five fresh runs


def test_a_runner_that_declares_no_counted_runs_has_no_executed_counts_whatever_its_class(rvv):
    session, model = rvv
    try:
        found = session.runner(VECTOR)
    except RuntimeNotProvided as exc:
        pytest.skip(str(exc))
    counted = measure_performance(session.cell(model, VECTOR, found), repeat=1, timed=False)
    assert "executed_dispatch_instructions" in counted.metrics
    threaded = Threaded(found.target, found.runtime, found.qemu)
    assert "--device=local-task" in threaded.command(Path("module.vmfb"), "main", [], [])
    cell = session.cell(model, VECTOR, threaded)
    assert cell.runs is None  # four threads: nothing recorded by content
    result = measure_performance(cell, repeat=1, timed=False)
    assert "executed_dispatch_instructions" not in result.metrics and result.samples["wall_s"]


THREADED_CONFTEST = '''
import pytest

from pytest_rvv.run.runner import Capabilities, Runner


class Threaded(Runner):
    @property
    def capabilities(self):
        return Capabilities(f"with 4 threads {super().capabilities.where}", emulated=True, threads=4)


@pytest.fixture
def rvv_runner(rvv_session, rvv_target):
    runner = rvv_session.runner(rvv_target)
    return Threaded(runner.target, runner.runtime, runner.qemu)
'''


def test_the_executed_counts_suite_skips_a_runner_that_declares_no_counted_runs(project):
    project.write(suite=False)
    shutil.copytree(SUITES / "vectorization", project.path / "vectorization", ignore=SUITE_COPY_IGNORE)
    (project.path / "conftest.py").write_text(THREADED_CONFTEST)
    result = project.run("vectorization/test_executed_vectorization.py", "--rvv-models=mlp",
                         f"--rvv-targets={VECTOR.name}")
    if "riscv64 runtime none" in result.stdout.str():
        pytest.skip("no riscv64 runtime on this machine")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines([f"SKIPPED * executed counts need QEMU: {VECTOR.name} runs with 4 threads under "
                                 f"qemu-riscv64 * -cpu {VECTOR.emulator_cpu}"])
