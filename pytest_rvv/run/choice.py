"""Which runner runs a target: a bundle's results, a board, QEMU or the host, with its runtime probed once.

``RunnerChoice`` is what the session (session.py) asks when it resolves a cell: it picks the runner class for a
target (``--rvv-bundle-results`` for riscv64 targets, else a board, else QEMU or the host), chooses the runtime for
its architecture (toolchain/runtimes.py) and probes it with a tiny module before a real model is trusted to it.
``Boards`` is the board side: which board a target runs on in this process, one SSH connection each, probed once.
What a runner can then do is its ``capabilities`` (run/runner.py); nothing here is asked by measuring code.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import re
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

from pytest_rvv.base.errors import (
    ConfigError,
    Remembered,
    RunFailed,
    RuntimeMismatch,
    RuntimeNotProvided,
    RvvError,
)
from pytest_rvv.base.store import Store, content_sha, digest
from pytest_rvv.compile.compiler import Compiler, ImportedModel
from pytest_rvv.config.boards import Board
from pytest_rvv.config.machine import Machine
from pytest_rvv.config.paths import without_path
from pytest_rvv.config.settings import Settings
from pytest_rvv.config.targets import BUILTIN_TARGETS, HOST, RISCV64, Target
from pytest_rvv.run.bundle_results import BundleResults, ResultsRunner
from pytest_rvv.run.qemu import Qemu, find_qemu
from pytest_rvv.run.recorded import OUTPUTS, RecordedRun, RecordedRuns
from pytest_rvv.run.runner import Runner, RunOutcome
from pytest_rvv.run.ssh_board import BoardFacts, BoardLink, BoardRunner
from pytest_rvv.toolchain.runtimes import Runtime, runtime_for
from pytest_rvv.toolchain.toolchain import Toolchain

# A tiny module that every runtime must run before real models are trusted to it.
PROBE_MLIR = """\
func.func @probe(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
  %0 = arith.addf %a, %b : tensor<4xf32>
  return %0 : tensor<4xf32>
}
"""
PROBE_TIMEOUT_S = 120.0
# What IREE's runtime says when it cannot load a module from another release.
_MISMATCH = re.compile(  # the clause that says so, and the versions when it gives them
    r"[^;\n]*(?:version mismatch|signature mismatch|required module features)[^;\n]*(?:; have [^;\n]*)?",
    re.IGNORECASE,
)


class TargetRefused(RuntimeNotProvided):
    """The machine that ran a bundle refused the target (an extension or VLEN it lacks): nothing of it is judged."""


class Boards:
    """The boards in use: which one a target runs on in this process, one SSH connection each, probed once."""

    def __init__(self, settings: Settings, store: Store) -> None:
        self.settings = settings
        self.store = store
        self._links: dict[Board, BoardLink] = {}  # the boards' SSH connections this process opened

    def of(self, target: Target) -> list[Board]:
        """The boards ``target`` may run on: its own ``board``, else --rvv-board's for riscv64 targets."""
        if target.board is not None:
            return [self.settings.boards[target.board]]
        if target.arch != RISCV64:
            return []
        return [self.settings.boards[n] for n in self.settings.board_names]

    def for_target(self, target: Target) -> Board | None:
        """The board ``target`` runs on in this process: one of ``of``, one per xdist worker."""
        boards = self.of(target)
        if not boards:
            return None
        worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
        index = int(worker[2:]) if worker[2:].isdigit() else 0
        return boards[index % len(boards)]

    def link(self, board: Board) -> BoardLink:
        """One multiplexed SSH connection per board per process (control sockets in a short /tmp path)."""
        if board not in self._links:
            self._links[board] = BoardLink(board, Path(tempfile.gettempdir()) / f"pytest-rvv-ssh-{os.getuid()}",
                                           self.store)
        return self._links[board]

    @functools.cache  # noqa: B019 - lives as long as the session
    def facts(self, board: Board) -> BoardFacts:
        return self.link(board).facts()

    def check(self, targets: tuple[Target, ...]) -> None:
        """Probe each board in use once and refuse a target it cannot run correctly (ConfigError, one line)."""
        for target in targets:
            for board in self.of(target):  # every board a worker may own
                if reason := self.facts(board).refuse(board, target):
                    raise ConfigError(reason)

    def machine(self, board: Board) -> Machine:
        """The board as the machine its runs' machine-bound numbers belong to."""
        facts = self.facts(board)
        return Machine(board.name, {"cpu": facts.isa, "vlen": str(facts.vlen), "kernel": facts.kernel,
                                    "board": "ssh"}, "board")

    def close(self) -> None:
        """Close every board connection this process opened (the start-up probe opens all boards in use)."""
        for link in self._links.values():
            link.close()


class RunnerChoice:
    """Chooses and checks the runner of each target for one toolchain (see the module docstring); ``compiler``
    compiles the probe module, ``runs`` keeps its emulated runs."""

    def __init__(self, settings: Settings, store: Store, boards: Boards, runs: RecordedRuns, toolchain: Toolchain,
                 compiler: Compiler, reference: bool = False) -> None:
        self.settings = settings
        self.store = store
        self.boards = boards
        self.runs = runs
        self.toolchain = toolchain
        self.compiler = compiler
        self.is_reference = reference  # the --rvv-compare side: its own runtime options apply
        self._runtimes: Remembered[Runtime] = Remembered(RvvError)  # per arch; a failure is remembered, said once

    def qemu(self, arch: str) -> Qemu:
        return find_qemu(arch, self.settings.qemu_dir)

    def runtime(self, arch: str, log: Callable[[str], None] = lambda line: None) -> Runtime:
        """The toolchain's runtime for ``arch`` (riscv64: the one its modules load in, toolchain/choice.py).

        Chosen once per process; a failure to choose (no runtime, none that loads) is raised again as is.
        """
        return self._runtimes.get(arch, lambda: runtime_for(arch, self.store, self.toolchain, self.settings,
                                                            self.probe_runtime, self.is_reference, log))

    def probe_runtime(self, executable: Path) -> str | None:
        """None when the riscv64 ``executable`` runs the toolchain's probe module, else its one-line reason.

        The answer is kept in the store under the runtime's and compiler's identity, so xdist workers and
        later sessions do not probe again.
        """
        qemu = self.qemu(RISCV64)
        compiler_version = self.toolchain.compiler_version
        key = digest(["runtime-probe-v2", content_sha(executable), compiler_version, qemu.version_text, PROBE_MLIR])

        def probe(tmp: Path) -> dict[str, object]:
            runner = Runner(BUILTIN_TARGETS["rv64gc"], Runtime(RISCV64, executable, None, "candidate"), qemu)
            reason = self._run_probe(runner)
            return {"loads": reason is None, "reason": reason or "", "compiler": compiler_version}

        entry = self.store.get_or_build("runtime-probes", key, probe)
        return None if entry.meta["loads"] else str(entry.meta["reason"])

    @functools.cached_property
    def bundle_results(self) -> BundleResults | None:
        """--rvv-bundle-results: a RISC-V machine's runs of a bundle, read and checked once (one line if damaged)."""
        path = self.settings.bundle_results
        if path is None or self.is_reference:
            return None
        results = BundleResults.load(path)
        results.check_toolchain(self.toolchain.compiler_version)
        return results

    def results_for(self, target: Target) -> BundleResults | None:
        """The bundle results ``target``'s cells are judged from (riscv64 targets, with --rvv-bundle-results)."""
        return self.bundle_results if target.arch == RISCV64 else None

    @functools.cache  # noqa: B019
    def runner(self, target: Target) -> Runner:
        """A checked runner: its runtime has run the probe module for this target (on its board, if any); a riscv64
        target judged from a bundle's results runs nothing here (TargetRefused when that machine refused it)."""
        if (results := self.results_for(target)) is not None:
            if reason := results.refusal(target.name):
                raise TargetRefused(f"{target.name} was refused on {results.machine.name}, which ran the "
                                    f"bundle: {reason}")
            return ResultsRunner(target, results)
        board = self.boards.for_target(target)
        if board is None:
            return self.emulated(target)
        return self._probed(BoardRunner(target, self.runtime(target.arch), self.boards.link(board),
                                        self.boards.facts(board)))

    @functools.cache  # noqa: B019
    def emulated(self, target: Target) -> Runner:
        """A checked runner of this machine for ``target`` (QEMU for riscv64, else the host), whatever runs the
        target here: a silicon run's estimates are measured on it (the same target and module, emulated)."""
        qemu = None if target.arch == HOST else self.qemu(target.arch)
        if qemu is not None:
            qemu.check_cpu(target.emulator_cpu, target.name)
        return self._probed(Runner(target, self.runtime(target.arch), qemu))

    def _probed(self, runner: Runner) -> Runner:
        """``runner`` once its runtime has run the probe module (RuntimeMismatch when it cannot load it)."""
        reason = self._run_probe(runner)
        if reason is not None:
            raise RuntimeMismatch(f"{runner.runtime.origin} cannot load modules from "
                                  f"{self.toolchain.compiler_version}: {reason}; use a runtime built from the "
                                  "same IREE release")
        return runner

    def machine_for(self, target: Target, here: Machine) -> Machine:
        """The machine a target's machine-bound numbers belong to: its board (or the machine that ran a bundle's
        results), else ``here``."""
        if (results := self.results_for(target)) is not None:
            return results.machine
        board = self.boards.for_target(target)
        return here if board is None else self.boards.machine(board)

    def _run_probe(self, runner: Runner) -> str | None:
        """None when ``runner`` runs the probe module correctly; the runtime's line when it cannot load it."""
        key = digest(["probe-source", PROBE_MLIR])

        def write_probe(tmp: Path) -> dict[str, object]:
            (tmp / "probe.mlir").write_text(PROBE_MLIR)
            return {"function": "probe"}

        source = self.store.get_or_build("probe", key, write_probe)
        imported = ImportedModel(source.file("probe.mlir"), "probe", key)
        # the probe has no matmul: compiled off the target's path, it runs even where the compiler lacks the path
        plain = dataclasses.replace(runner.target, extra_flags=without_path(runner.target.extra_flags))
        artifact = self.compiler.compile("probe", imported, plain)
        a = np.arange(4, dtype=np.float32)
        b = np.full(4, 0.5, dtype=np.float32)
        with tempfile.TemporaryDirectory(prefix="pytest-rvv-probe-") as tmp:
            try:
                if runner.capabilities.recorded:  # emulated (not the host, not a board): once per content
                    outcome: RunOutcome | RecordedRun = self.runs.run(OUTPUTS, artifact, runner, [a, b], 1, None)
                else:
                    outcome = runner.run(artifact, [a, b], Path(tmp), 1, max(self.settings.timeout_s,
                                                                              PROBE_TIMEOUT_S))
            except RunFailed as exc:
                mismatch = _MISMATCH.search(exc.details)
                if mismatch:
                    return mismatch.group(0).strip()
                raise RunFailed(f"runtime check failed for target {runner.target.name}: {exc}",
                                exc.details) from exc
        if not np.array_equal(outcome.outputs[0], a + b):
            raise RunFailed(f"runtime check for target {runner.target.name}: probe returned "
                            f"{outcome.outputs[0].tolist()}, expected {(a + b).tolist()}", outcome.repro)
        return None
