"""RvvSession: the pipeline (model -> compile -> run -> compare) for one test session.

Plain object used by the pytest plugin's fixtures and by the ``pytest-rvv`` command. Results and
errors are memoised per process, so a model compiled for the compile test is reused by the
agreement test; across processes (xdist workers, later sessions) the on-disk store is shared.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pytest_rvv.base.errors import (
    ConfigError,
    PathUnavailable,
    RunFailed,
    RuntimeMismatch,
    RuntimeNotProvided,
    RvvError,
)
from pytest_rvv.base.stages import Stages
from pytest_rvv.base.store import Store, content_sha, digest, file_sha256
from pytest_rvv.compile.compiler import Artifact, Compiler, ImportedModel
from pytest_rvv.config.boards import Board
from pytest_rvv.config.machine import Machine, this_machine
from pytest_rvv.config.paths import PATHS, without_path
from pytest_rvv.config.settings import Settings
from pytest_rvv.config.targets import BUILTIN_TARGETS, HOST, RISCV64, Target
from pytest_rvv.model.model import Model
from pytest_rvv.model.prepare import graph_inputs, load_onnx, prepare
from pytest_rvv.model.quantize import output_steps
from pytest_rvv.run.bundle_results import BundleResults, ResultsRunner
from pytest_rvv.run.onnxruntime import onnxruntime_outputs, reference_level
from pytest_rvv.run.qemu import Qemu, find_qemu
from pytest_rvv.run.recorded import OUTPUTS, CellRuns, RecordedRun, RecordedRuns
from pytest_rvv.run.runner import Runner, RunOutcome
from pytest_rvv.run.ssh_board import BoardFacts, BoardLink, BoardRunner
from pytest_rvv.toolchain.runtimes import Runtime, runtime_for
from pytest_rvv.toolchain.toolchain import Toolchain, find_toolchain

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


@dataclass(frozen=True)
class Oracle:
    """Seeded inputs and onnxruntime's outputs for one model: what every run of it is held against."""

    prepared: Path
    inputs: list[np.ndarray]
    outputs: list[np.ndarray]
    steps: tuple[float | None, ...] = ()  # each output's quantization step (int8 models; model/quantize.py)


@dataclass(frozen=True)
class Cell:
    """One model x target on one toolchain, resolved once (``RvvSession.cell``) into what measuring and judging
    need, and handed down as a value: code that measures reads it, and never calls back into the session."""

    model: Model
    target: Target
    toolchain: Toolchain
    artifact: Artifact
    oracle: Oracle | None  # seeded inputs and onnxruntime's outputs; None when nothing runs the cell
    runner: Runner | None  # None when no runtime runs this target here
    runs: CellRuns | None  # its recorded runs (emulated targets only: the host's and a board's are run directly)
    machine: Machine  # whose machine-bound numbers these are: its board's, else this machine's
    store: Store
    stages: Stages
    timeout_s: float

    def recorded(self, kind: str, workdir: Path | None = None) -> RecordedRun | None:
        """The ``kind`` run (plain, counted, elements), emulated once per content; None where runs are not
        recorded (the host, a board: run those directly)."""
        return None if self.runs is None else self.runs.run(kind, workdir)

    def given(self) -> tuple[Runner, Oracle]:
        """The runner and oracle of a cell that runs (a cell resolved without a runner has neither)."""
        if self.runner is None or self.oracle is None:
            raise ValueError(f"{self.model.name} x {self.target.name} was resolved without a runner")
        return self.runner, self.oracle


class RvvSession:
    """The pipeline with its settings, cache and memoised stages."""

    def __init__(self, settings: Settings,
                 toolchain: Toolchain | None = None, reference: bool = False) -> None:
        self.settings = settings
        self.is_reference = reference  # the --rvv-compare side: its own runtime options apply
        self.store = Store(settings.cache_dir)
        self._toolchain = toolchain
        self._links: dict[Board, BoardLink] = {}  # the boards' SSH connections this process opened
        self._runtimes: dict[str, Runtime | RvvError] = {}  # per arch; a failure is remembered, said once
        self.stages = Stages()  # where this process's time goes (--rvv-profile)

    @functools.cached_property
    def toolchain(self) -> Toolchain:
        """The toolchain given, else the user's build (--rvv-iree-build), else the installed wheel's."""
        return self._toolchain or find_toolchain(self.settings.iree_build)

    @functools.cached_property
    def machine(self) -> Machine:
        """This machine's identity (name and fingerprint) for machine-bound baselines."""
        try:
            qemu = self.qemu("riscv64")
            emulator = f"qemu {qemu.version_text}" + (" plugins" if qemu.supports_plugins else "")
        except RvvError:
            emulator = "no qemu"
        return this_machine(self.settings.machine, emulator)

    @functools.cached_property
    def runs(self) -> RecordedRuns:
        """Emulated runs kept by content (run/recorded.py); --rvv-no-cache runs them all again."""
        return RecordedRuns(self.store, self.settings.timeout_s, fresh=self.settings.fresh_runs, stages=self.stages)

    @functools.cache  # noqa: B019
    def cell(self, model: Model, target: Target, runner: Runner | None) -> Cell:
        """``model`` x ``target`` on this session's toolchain, resolved once: compiled, its oracle (onnxruntime's
        outputs, when something runs the cell), and its recorded runs (emulated targets). Raises what compiling
        raises."""
        artifact = self.artifact(model, target)
        oracle = self.oracle(model) if runner is not None else None
        runs = None
        if runner is not None and runner.qemu is not None and oracle is not None:
            runs = CellRuns(self.runs, artifact, runner, oracle.inputs, len(oracle.outputs), self.store)
        return Cell(model, target, self.toolchain, artifact, oracle, runner, runs, self.machine_for(target),
                    self.store, self.stages, self.settings.timeout_s)

    @functools.cached_property
    def compiler(self) -> Compiler:
        return Compiler(self.toolchain, self.store, self.stages)

    # model -> prepared -> imported -> artifact
    @functools.cache  # noqa: B019 - the session lives as long as the pytest session
    def prepared(self, model: Model) -> Path:
        with self.stages.time("prepare"):
            return prepare(model, self.settings.cache_dir)

    @functools.cache  # noqa: B019
    def imported(self, model: Model) -> ImportedModel:
        return self.compiler.import_onnx(model.name, self.prepared(model), model.opset)

    @functools.cache  # noqa: B019
    def artifact(self, model: Model, target: Target) -> Artifact:
        self.check_path(target)
        return self.compiler.compile(model.name, self.imported(model), target)

    def check_path(self, target: Target) -> None:
        """Refuse, in one line, a target whose matmul path (config/paths.py) this toolchain's compiler lacks."""
        lacking = self.toolchain.lacks(PATHS[target.path].flags)
        if lacking:
            raise PathUnavailable(f"{target.name}: the {target.path} path needs {' '.join(lacking)}, which "
                                  f"iree-compile {self.toolchain.release} does not have: it could not run")

    @functools.cache  # noqa: B019
    def oracle(self, model: Model) -> Oracle:
        """Seeded inputs and onnxruntime's outputs, cached beside the compiled modules."""
        import onnxruntime

        path = self.prepared(model)
        level = reference_level(path)
        key = digest(["reference-v1", file_sha256(path), repr(model.inputs), str(model.seed), onnxruntime.__version__,
                      *([] if level == "all" else [level])])

        def build(tmp: Path) -> dict[str, object]:
            with self.stages.time("onnxruntime"):
                return run_reference(tmp)

        def run_reference(tmp: Path) -> dict[str, object]:
            names = [i.name for i in graph_inputs(load_onnx(path))]
            by_name = dict(zip([s.name for s in model.inputs], model.generate_inputs(), strict=True))
            inputs = [by_name[n] for n in names]
            outputs = onnxruntime_outputs(path, names, inputs, level)
            for kind, arrays in (("input", inputs), ("output", outputs)):
                for i, array in enumerate(arrays):
                    np.save(tmp / f"{kind}_{i}.npy", array, allow_pickle=False)
            return {"model": model.name, "inputs": len(inputs), "outputs": len(outputs)}

        entry = self.store.get_or_build("references", key, build)

        def load(kind: str, count: object) -> list[np.ndarray]:
            return [np.load(entry.file(f"{kind}_{i}.npy"), allow_pickle=False) for i in range(int(str(count)))]

        return Oracle(path, load("input", entry.meta["inputs"]), load("output", entry.meta["outputs"]),
                         output_steps(path))

    # run side
    def qemu(self, arch: str) -> Qemu:
        return find_qemu(arch, self.settings.qemu_dir)

    def runtime(self, arch: str, log: Callable[[str], None] = lambda line: None) -> Runtime:
        """This toolchain's runtime for ``arch`` (riscv64: the one its modules load in, toolchain/choice.py).

        Chosen once per process; a failure to choose (no runtime, none that loads) is raised again as is.
        """
        if arch not in self._runtimes:
            try:
                self._runtimes[arch] = runtime_for(arch, self.store, self.toolchain, self.settings,
                                                   self.probe_runtime, self.is_reference, log)
            except RvvError as exc:
                self._runtimes[arch] = exc
        found = self._runtimes[arch]
        if isinstance(found, RvvError):
            raise found
        return found

    def probe_runtime(self, executable: Path) -> str | None:
        """None when the riscv64 ``executable`` runs this toolchain's probe module, else its one-line reason.

        The answer is kept in the store under the runtime's and compiler's identity, so xdist workers and
        later sessions do not probe again.
        """
        qemu = self.qemu(RISCV64)
        key = digest(["runtime-probe-v2", content_sha(executable), self.toolchain.compiler_version,
                      qemu.version_text, PROBE_MLIR])

        def probe(tmp: Path) -> dict[str, object]:
            runner = Runner(BUILTIN_TARGETS["rv64gc"], Runtime(RISCV64, executable, None, "candidate"), qemu)
            reason = self._run_probe(runner)
            return {"loads": reason is None, "reason": reason or "", "compiler": self.toolchain.compiler_version}

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
        target judged from a bundle's results runs nothing here."""
        if (results := self.results_for(target)) is not None:
            if reason := results.refusal(target.name):
                raise RuntimeNotProvided(f"{target.name} was refused on {results.machine.name}, which ran the "
                                         f"bundle: {reason}")
            return ResultsRunner(target, results)
        board = self.board_for(target)
        if board is not None:
            runner: Runner = BoardRunner(target, self.runtime(target.arch), self.link(board), self.facts(board))
        else:
            qemu = None if target.arch == HOST else self.qemu(target.arch)
            if qemu is not None:
                qemu.check_cpu(target.emulator_cpu, target.name)
            runner = Runner(target, self.runtime(target.arch), qemu)
        self._probe(runner)
        return runner

    # boards
    def boards_of(self, target: Target) -> list[Board]:
        """The boards ``target`` may run on: its own ``board``, else --rvv-board's for riscv64 targets."""
        if target.board is not None:
            return [self.settings.boards[target.board]]
        if target.arch != RISCV64:
            return []
        return [self.settings.boards[n] for n in self.settings.board_names]

    def board_for(self, target: Target) -> Board | None:
        """The board ``target`` runs on in this process: one of boards_of, one per xdist worker."""
        boards = self.boards_of(target)
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

    @functools.cache  # noqa: B019
    def facts(self, board: Board) -> BoardFacts:
        return self.link(board).facts()

    def check_boards(self) -> None:
        """Probe each board in use once and refuse a target it cannot run correctly (ConfigError, one line)."""
        for target in self.settings.targets:
            for board in self.boards_of(target):  # every board a worker may own
                if reason := self.facts(board).refuse(board, target):
                    raise ConfigError(reason)

    def machine_for(self, target: Target) -> Machine:
        """The machine a target's machine-bound numbers belong to: its board (or the machine that ran a bundle's
        results), else this machine."""
        if (results := self.results_for(target)) is not None:
            return results.machine
        board = self.board_for(target)
        if board is None:
            return self.machine
        facts = self.facts(board)
        return Machine(board.name, {"cpu": facts.isa, "vlen": str(facts.vlen), "kernel": facts.kernel,
                                    "board": "ssh"}, "board")

    def close(self) -> None:
        """Close every board connection this process opened (the start-up probe opens all boards in use)."""
        for link in self._links.values():
            link.close()

    def _probe(self, runner: Runner) -> None:
        reason = self._run_probe(runner)
        if reason is not None:
            raise RuntimeMismatch(f"{runner.runtime.origin} cannot load modules from "
                                  f"{self.toolchain.compiler_version}: {reason}; use a runtime built from the same "
                                  "IREE release")

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
                if runner.qemu is not None:  # emulated (not the host, not a board): once per content
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
