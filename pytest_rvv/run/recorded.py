"""Emulated runs kept by content: a run whose result is already known is looked up, not emulated again.

A module run under QEMU (one thread, ``local-sync``, an empty environment and a fixed guest address
space: run/runner.py) is deterministic: the same module bytes, runtime binary, QEMU binary and CPU
flags, plugin build and inputs give the same outputs, executed counts and IREE statistics. So each
kind of run is done once per content and kept in the store under everything that decides it:

- ``plain``: the run the agreement check and the performance side share (the RSS launcher around
  the emulator, ``--print_statistics``): outputs, IREE's peak allocation, the emulator's peak RSS,
  and the run's own wall and CPU time (a machine-bound figure: shown, never gated from the store);
- ``counted``: the same run with the ``rvv_counter`` plugin: executed instructions per block;
- ``elements``: the plugin with lane occupancy (``elements=on``), for report runs;
- ``outputs``: the run alone (the ONNX node tests: only their outputs count).

A counted run may also be kept from another run of the same content that QEMU makes anyway (the memory-trace run:
``CellRuns.counting_along``): the counting plugin rides along, and the dispatches' counts are the same as alone (the
guest runs the same code; tests/test_recorded_runs.py holds it). Its wall and CPU time are then that run's.

A failed run is not kept (it raises). A damaged entry fails its manifest's hashes and is run again.
``--rvv-no-cache`` (``RecordedRuns(fresh=True)``) runs everything again and keeps nothing new: each content once per
session (run/kept.py, which the traced and the peers' runs go through too).
Only emulated runs are kept: the host target's code and time belong to this machine.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pytest_rvv.base.cbuild import build_c
from pytest_rvv.base.errors import RunFailed, ToolMissing
from pytest_rvv.base.stages import Stages
from pytest_rvv.base.store import Store, content_sha, digest
from pytest_rvv.compile.compiler import Artifact
from pytest_rvv.run.kept import KeptRuns
from pytest_rvv.run.qemu_plugin import build_plugin, check_plugin_support, plugin_option
from pytest_rvv.run.runner import Runner, RunOutcome

PLAIN, COUNTED, ELEMENTS, OUTPUTS = "plain", "counted", "elements", "outputs"
LOADED = "loaded"  # counted, loading the module only: its one-time work (run/runner.py, load_only)
KINDS = (PLAIN, COUNTED, ELEMENTS, OUTPUTS, LOADED)
NAMESPACE = "runs"
# v2: keeps stderr too (--print_statistics writes there); v3: the runtime runs from a fixed-length directory
# (run/runner.py RUNTIME_DIR_LENGTH: runs made from a user's own cache path may differ)
RECIPE = "recorded-run-v3"
STATISTICS_ARGS = ("--print_statistics",)


def rss_probe(store: Store) -> Path:
    """The RSS launcher of plain and timed runs (run/rss_probe.c: forks the command, reports its peak RSS)."""
    return build_c(store, "pytest_rvv.run", ("rss_probe.c",), "rss_probe", shared=False)


@dataclass(frozen=True)
class RecordedRun:
    """One run's deterministic results (and, for ``plain``, the run's own time), fresh or from the store."""

    kind: str
    outputs: list[np.ndarray]
    stdout: str  # iree-run-module's standard output and error, tails (--print_statistics lines are in stderr)
    counts: Path | None  # the plugin's output (counted and elements runs)
    rss_kb: int | None  # the emulator's peak RSS (plain runs)
    wall_s: float
    cpu_s: float
    repro: str
    cached: bool  # True when it came from the store (its time was measured by an earlier session)


def inputs_digest(inputs: list[np.ndarray]) -> str:
    """The digest of a run's inputs: each one's dtype, shape and bytes."""
    return digest([f"{a.dtype}{a.shape}".encode() + np.ascontiguousarray(a).tobytes() for a in inputs])


def emulated_identity(artifact: Artifact, runner: Runner) -> list[str]:
    """What decides an emulated run of ``artifact`` besides its inputs and helper: the module's bytes and function,
    the runtime and its sysroot, QEMU and its CPU flags."""
    return [content_sha(artifact.path), artifact.function, content_sha(runner.runtime.executable),
            str(runner.runtime.sysroot), content_sha(runner.emulator().path), runner.target.emulator_cpu]


def run_key(kind: str, artifact: Artifact, runner: Runner, inputs: list[np.ndarray],
            helper: Path | None) -> str:
    """Everything that decides a run's results: module bytes, runtime, QEMU and its CPU flags, helper, inputs."""
    if not runner.capabilities.recorded:
        raise ValueError(f"only emulated runs are recorded: {runner.target.name} runs {runner.where}")
    return digest([RECIPE, kind, *emulated_identity(artifact, runner), content_sha(helper) if helper else "",
                   inputs_digest(inputs)])


class RecordedRuns:
    """Plain, counted and elements runs of modules through one store (see the module docstring)."""

    def __init__(self, store: Store, timeout_s: float | None, fresh: bool = False,
                 stages: Stages | None = None) -> None:
        self.store = store
        self.stages = stages or Stages()
        self.timeout_s = timeout_s
        self.kept = KeptRuns(store, fresh)  # every emulated run's entry: the store's, or this session's (fresh)

    @property
    def fresh(self) -> bool:
        return self.kept.fresh

    @property
    def emulated(self) -> int:
        """Runs this process really emulated (the ``emulate`` stage's work)."""
        return int(self.stages.totals.get("emulate", [0, 0, 0, 0])[2])

    @property
    def looked_up(self) -> int:
        """Runs this process read back from the store (the ``emulate`` stage's cache hits)."""
        return int(self.stages.totals.get("emulate", [0, 0, 0, 0])[3])

    def run(self, kind: str, artifact: Artifact, runner: Runner, inputs: list[np.ndarray], num_outputs: int,
            helper: Path | None, workdir: Path | None = None) -> RecordedRun:
        """The ``kind`` run of ``artifact`` on ``inputs``; ``helper`` is the RSS launcher (plain) or the plugin.

        ``workdir``: where an emulated run happens (its repro line names it; default a temporary folder).
        """
        if kind not in KINDS:
            raise ValueError(f"unknown run kind {kind!r}")
        key = run_key(kind, artifact, runner, inputs, helper)

        def emulate(tmp: Path) -> dict[str, Any]:
            try:
                return self._emulate(kind, artifact, runner, inputs, num_outputs, helper, tmp, workdir)
            except RunFailed as exc:  # an error exit repeats on the same content: recorded, so a rerun runs nothing
                if not exc.deterministic:
                    raise
                return {"kind": kind, "failed": str(exc), "details": exc.details, "model": artifact.model,
                        "target": runner.target.name}

        entry = self.kept.get_or_build(NAMESPACE, key, emulate)
        if not entry.created:
            self.stages.hit("emulate")
        if "failed" in entry.meta:
            raise RunFailed(str(entry.meta["failed"]), str(entry.meta["details"]), deterministic=True)
        return self._load(kind, entry.path, entry.meta, cached=not entry.created)

    def _emulate(self, kind: str, artifact: Artifact, runner: Runner, inputs: list[np.ndarray], num_outputs: int,
                 helper: Path | None, into: Path, workdir: Path | None) -> dict[str, Any]:

        with tempfile.TemporaryDirectory(prefix="pytest-rvv-run-") as scratch:
            work = Path(scratch)
            counts = work / "counts.txt"
            rss = work / "rss.txt"
            launcher: tuple[str, ...] = ()
            qemu_args: tuple[str, ...] = ()
            if kind == PLAIN and helper is not None:
                launcher = (str(helper), str(rss))
            elif kind in (COUNTED, ELEMENTS, LOADED):
                if helper is None:
                    raise ValueError(f"a {kind} run needs the counting plugin")
                qemu_args = plugin_option(helper, counts, kind == ELEMENTS)
            # counted runs exactly as the executed snapshots were recorded (no statistics: they allocate)
            with self.stages.time("emulate"):
                outcome = runner.run(artifact, inputs, workdir or work / "run", num_outputs, self.timeout_s,
                                     qemu_args=qemu_args, launcher=launcher,
                                     runtime_args=STATISTICS_ARGS if kind == PLAIN else (), load_only=kind == LOADED)
            return _keep(kind, artifact, runner, outcome, counts, rss, into)

    def has(self, kind: str, artifact: Artifact, runner: Runner, inputs: list[np.ndarray], helper: Path) -> bool:
        """Whether the ``kind`` run of this content is kept already."""
        return self.kept.has(NAMESPACE, run_key(kind, artifact, runner, inputs, helper))

    def keep(self, kind: str, artifact: Artifact, runner: Runner, inputs: list[np.ndarray], helper: Path,
             outcome: RunOutcome, counts: Path) -> None:
        """Keep ``outcome``, a run of this content that loaded ``helper`` (the counting plugin) beside what else it
        ran, as its ``kind`` run, unless one is kept already."""
        self.kept.get_or_build(NAMESPACE, run_key(kind, artifact, runner, inputs, helper),
                               lambda into: _keep(kind, artifact, runner, outcome, counts, None, into))

    def _load(self, kind: str, path: Path, meta: dict[str, Any], cached: bool) -> RecordedRun:
        outputs = [np.load(path / f"output_{i}.npy", allow_pickle=False) for i in range(int(meta["outputs"]))]
        counts = path / "counts.txt" if (path / "counts.txt").is_file() else None
        return RecordedRun(kind, outputs, str(meta["stdout"]), counts, meta.get("rss_kb"), float(meta["wall_s"]),
                           float(meta["cpu_s"]), str(meta["repro"]), cached)


def _keep(kind: str, artifact: Artifact, runner: Runner, outcome: RunOutcome, counts: Path, rss: Path | None,
          into: Path) -> dict[str, Any]:
    """Write a run's outputs and counts into its entry folder ``into``; its metadata."""
    for i, array in enumerate(outcome.outputs):
        np.save(into / f"output_{i}.npy", array, allow_pickle=False)
    if counts.is_file():
        shutil.copyfile(counts, into / "counts.txt")
    output = outcome.process.stdout[-20000:] + outcome.process.stderr[-20000:]
    return {"kind": kind, "outputs": len(outcome.outputs), "stdout": output,
            "rss_kb": int(rss.read_text()) if rss is not None and rss.is_file() else None,
            "wall_s": round(outcome.process.wall_s, 4), "cpu_s": round(outcome.process.cpu_s, 4),
            "repro": outcome.repro, "model": artifact.model, "target": runner.target.name}


@dataclass(frozen=True)
class Counting:
    """The counting plugin riding along another run of a cell's content: its QEMU arguments, and ``keep(outcome)``,
    which keeps that run as the cell's counted run once its outputs were checked."""

    qemu_args: tuple[str, ...]
    keep: Callable[[RunOutcome], None]


@dataclass(frozen=True)
class CellRuns:
    """The recorded runs of one compiled module on one emulated runner, on its seeded inputs: each kind is emulated
    once per content (``RecordedRuns``), with the helper it needs (the RSS launcher, or the counting plugin)."""

    runs: RecordedRuns
    artifact: Artifact
    runner: Runner
    inputs: list[np.ndarray]
    num_outputs: int
    store: Store

    def run(self, kind: str, workdir: Path | None = None) -> RecordedRun:
        """The ``kind`` run; ToolMissing when this QEMU cannot load the counting plugin a counted run needs."""
        if kind == PLAIN:
            helper = rss_probe(self.store)
        else:
            check_plugin_support(self.runner.emulator())
            helper = build_plugin(self.store)
        return self.runs.run(kind, self.artifact, self.runner, self.inputs, self.num_outputs, helper, workdir)

    def has(self, kind: str) -> bool:
        """Whether the ``kind`` run (counted, elements, loaded) is kept already (False where QEMU loads no plugin)."""
        helper = self._counter()
        return helper is not None and self.runs.has(kind, self.artifact, self.runner, self.inputs, helper)

    def counting_along(self, scratch: Path) -> Counting | None:
        """How a run of this content that QEMU makes anyway (the memory-trace run) counts too, writing into
        ``scratch``: None when the counted run is kept already or this QEMU cannot load the plugin."""
        helper = self._counter()
        if helper is None or self.runs.has(COUNTED, self.artifact, self.runner, self.inputs, helper):
            return None
        counts = scratch / "counts.txt"
        return Counting(plugin_option(helper, counts, False),
                        lambda outcome: self.runs.keep(COUNTED, self.artifact, self.runner, self.inputs, helper,
                                                       outcome, counts))

    def _counter(self) -> Path | None:
        """The counting plugin, or None where this QEMU cannot load plugins."""
        try:
            check_plugin_support(self.runner.emulator())
        except ToolMissing:
            return None
        return build_plugin(self.store)
