"""RvvSession: the pipeline (model -> compile -> run -> compare) for one test session.

Plain object used by the pytest plugin's fixtures and by the ``pytest-rvv`` command. Results and
errors are memoised per process, so a model compiled for the compile test is reused by the
agreement test; across processes (xdist workers, later sessions) the on-disk store is shared.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pytest_rvv.base.errors import ConfigError, PathUnavailable, Remembered, RuntimeNotProvided, RvvError
from pytest_rvv.base.stages import Stages
from pytest_rvv.base.store import Store, content_sha, digest
from pytest_rvv.compile.compiler import Artifact, Compiler, ImportedModel
from pytest_rvv.config.boards import Board
from pytest_rvv.config.machine import Machine, this_machine
from pytest_rvv.config.paths import PATHS
from pytest_rvv.config.settings import Settings
from pytest_rvv.config.targets import Target
from pytest_rvv.model.model import Model
from pytest_rvv.model.prepare import graph_inputs, load_onnx, prepare
from pytest_rvv.model.quantize import output_steps
from pytest_rvv.run.bundle_results import BundleResults
from pytest_rvv.run.choice import Boards, RunnerChoice, TargetRefused
from pytest_rvv.run.onnxruntime import onnxruntime_outputs, reference_level
from pytest_rvv.run.qemu import Qemu, find_qemu
from pytest_rvv.run.recorded import CellRuns, RecordedRun, RecordedRuns
from pytest_rvv.run.runner import Runner
from pytest_rvv.run.ssh_board import BoardFacts
from pytest_rvv.toolchain.environments import toolchain_from_spec
from pytest_rvv.toolchain.runtimes import Runtime
from pytest_rvv.toolchain.toolchain import Toolchain, find_toolchain


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
    elsewhere: bool = False  # its machine-bound numbers are another machine's (a board's, or a bundle's machine's)

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
    """The pipeline with its settings, cache and memoised stages. It resolves a model x target into a Cell once
    (``resolve``); which runner runs a target, and its runtime, are chosen in run/choice.py (``choice``, ``boards``)."""

    def __init__(self, settings: Settings,
                 toolchain: Toolchain | None = None, reference: bool = False, stages: Stages | None = None) -> None:
        self.settings = settings
        self.is_reference = reference  # the --rvv-compare side: its own runtime options apply
        self.store = Store(settings.cache_dir)
        self._toolchain = toolchain
        self.stages = stages or Stages()  # where this process's time goes (--rvv-profile)
        self._releases: Remembered[RvvSession] = Remembered(ConfigError)  # at_release's, each fetched (or refused) once
        # emulated runs kept by content (run/recorded.py); --rvv-no-cache runs them all again
        self.runs = RecordedRuns(self.store, settings.timeout_s, fresh=settings.fresh_runs, stages=self.stages)
        self.boards = Boards(settings, self.store)  # which board runs a target here, probed once

    @functools.cached_property
    def toolchain(self) -> Toolchain:
        """The toolchain given, else the user's build (--rvv-iree-build), else the installed wheel's."""
        return self._toolchain or find_toolchain(self.settings.iree_build)

    def at_release(self, release: str | None) -> RvvSession:
        """This session compiling with ``iree-base-compiler==release`` (fetched once into the tools' environments,
        toolchain/environments.py; the same ConfigError again when it cannot be had), on a runtime its modules load in
        (chosen as for the --rvv-compare side, whose runtime options apply), its time in this session's stages;
        itself for None or the release under test."""
        if release is None or release == self.toolchain.release:
            return self

        def fetched() -> RvvSession:
            toolchain = toolchain_from_spec(f"iree-base-compiler=={release}", self.settings.tools_dir,
                                            option="a published row's release")
            return RvvSession(self.settings, toolchain=toolchain, reference=True, stages=self.stages)

        return self._releases.get(release, fetched)

    @functools.cached_property
    def machine(self) -> Machine:
        """This machine's identity (name and fingerprint) for machine-bound baselines."""
        try:
            qemu = self.qemu("riscv64")
            emulator = (f"qemu {qemu.version_text}" + (" plugins" if qemu.supports_plugins else "")
                        + (f" {qemu.build_cflags.removeprefix('-march=')}" if qemu.build_cflags else ""))
        except RvvError:
            emulator = "no qemu"
        return this_machine(self.settings.machine, emulator)

    @functools.cache  # noqa: B019
    def resolve(self, model: Model, target: Target) -> Cell:
        """``model`` x ``target`` resolved once, its runner chosen by run/choice.py: without one (no runtime can be
        provided here) the cell is compile side only. Raises TargetRefused when the machine that ran a bundle refused
        the target, and what choosing a runner or compiling raises."""
        try:
            runner: Runner | None = self.choice.runner(target)
        except TargetRefused:
            raise
        except RuntimeNotProvided:
            runner = None
        return self.cell(model, target, runner)

    @functools.cache  # noqa: B019
    def cell(self, model: Model, target: Target, runner: Runner | None) -> Cell:
        """``model`` x ``target`` on this session's toolchain with ``runner``, resolved once: compiled, its oracle
        (onnxruntime's outputs, when something runs the cell), and its recorded runs (runners whose runs are
        recorded by content). Raises what compiling raises."""
        artifact = self.artifact(model, target)
        oracle = self.oracle(model) if runner is not None else None
        runs = None
        if runner is not None and runner.capabilities.recorded and oracle is not None:
            runs = CellRuns(self.runs, artifact, runner, oracle.inputs, len(oracle.outputs), self.store)
        machine = self.choice.machine_for(target, self.machine)  # a board's, a bundle's machine, else this one
        return Cell(model, target, self.toolchain, artifact, oracle, runner, runs, machine, self.store, self.stages,
                    self.settings.timeout_s, elsewhere=machine != self.machine)

    @functools.cached_property
    def compiler(self) -> Compiler:
        return Compiler(self.toolchain, self.store, self.stages, self.settings.targets, self.settings.allocator,
                        self.settings.tools_dir)

    @functools.cached_property
    def choice(self) -> RunnerChoice:
        """Which runner runs a target, with this toolchain's runtime chosen and probed (run/choice.py)."""
        return RunnerChoice(self.settings, self.store, self.boards, self.runs, self.toolchain, self.compiler,
                            self.is_reference)

    # model -> prepared -> imported -> artifact
    @functools.cache  # noqa: B019 - the session lives as long as the pytest session
    def prepared(self, model: Model) -> Path:
        with self.stages.time("prepare"):
            return prepare(model, self.settings.cache_dir)

    @functools.cache  # noqa: B019
    def imported(self, model: Model) -> ImportedModel:
        """The model's MLIR: imported from its prepared graph, or the MLIR its source gives instead (the graph then
        only feeds the reference)."""
        given = getattr(model.source, "mlir", None)
        text = given() if given is not None else None
        if text is not None:
            return self.compiler.given_mlir(model.name, text)
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
        key = digest(["reference-v1", content_sha(path), repr(model.inputs), str(model.seed), onnxruntime.__version__,
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

    # run side: run/choice.py chooses; these are its answers for this session's toolchain
    def qemu(self, arch: str) -> Qemu:
        return find_qemu(arch, self.settings.qemu_dir)

    def runtime(self, arch: str, log: Callable[[str], None] = lambda line: None) -> Runtime:
        """This toolchain's runtime for ``arch``, chosen once per process (``RunnerChoice.runtime``)."""
        return self.choice.runtime(arch, log)

    def probe_runtime(self, executable: Path) -> str | None:
        """None when the riscv64 ``executable`` runs this toolchain's probe module, else its one-line reason."""
        return self.choice.probe_runtime(executable)

    @property
    def bundle_results(self) -> BundleResults | None:
        """--rvv-bundle-results: a RISC-V machine's runs of a bundle, read and checked once (one line if damaged);
        without the option no toolchain is looked for."""
        return None if self.settings.bundle_results is None else self.choice.bundle_results

    def runner(self, target: Target) -> Runner:
        """A checked runner for ``target`` (``RunnerChoice.runner``)."""
        return self.choice.runner(target)

    def emulated(self, model: Model, target: Target) -> Cell:
        """``model`` x ``target`` on an emulated runner of this machine (``RunnerChoice.emulated``), whatever runs the
        target here (a board, a bundle's results): the twin a silicon run's estimates are measured on."""
        return self.cell(model, target, self.choice.emulated(target))

    def board_for(self, target: Target) -> Board | None:
        return self.boards.for_target(target)

    def facts(self, board: Board) -> BoardFacts:
        return self.boards.facts(board)

    def check_boards(self) -> None:
        """Probe each board in use once and refuse a target it cannot run correctly (ConfigError, one line)."""
        self.boards.check(self.settings.targets)

    def close(self) -> None:
        """Close every board connection this process opened."""
        self.boards.close()
