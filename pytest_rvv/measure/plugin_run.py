"""One emulated run of a cell's module with a QEMU plugin, kept by content as every emulated run is (run/kept.py;
emulated again with --rvv-no-cache): what the traced measurements (memory traffic, work per thread) share. Nothing is
kept from a run whose outputs disagree with onnxruntime, nor from one killed at the timeout."""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pytest_rvv.base.errors import RvvError
from pytest_rvv.base.store import content_sha, digest
from pytest_rvv.measure.agreement import compare
from pytest_rvv.run.kept import KeptRuns
from pytest_rvv.run.qemu_plugin import check_plugin_support
from pytest_rvv.run.recorded import emulated_identity, inputs_digest
from pytest_rvv.run.runner import Runner
from pytest_rvv.session import Cell, Oracle


@dataclass(frozen=True)
class PluginRun:
    """The plugin's output file (in the store) and the run's wall time when it was made."""

    output: Path
    wall_s: float


def plugin_run(cell: Cell, runner: Runner, oracle: Oracle, workdir: Path, *, namespace: str, recipe: str,
               plugin: Path, key: Sequence[str], output: str, qemu_args: Callable[[Path], Sequence[str]],
               what: str, count: bool = False) -> PluginRun:
    """Run ``cell``'s module on ``runner`` under QEMU with ``plugin`` (``qemu_args(out)`` loads it writing ``out``),
    once per content: module, runtime, QEMU and its CPU, plugin, inputs and ``key`` (what else decides the result).
    ``what`` names the run in a disagreement ("in the traced run", "with 4 threads"). ``count``: when this run must
    be emulated and the cell's counted run (same module, runtime, one thread) is not kept yet, the counting plugin
    rides along and the run is kept as that counted run too: one emulation instead of two."""
    check_plugin_support(runner.emulator())
    artifact = cell.artifact
    entry_key = digest([recipe, *emulated_identity(artifact, runner), content_sha(plugin), *key,
                        inputs_digest(oracle.inputs)])

    def emulate(tmp: Path) -> dict[str, Any]:
        with tempfile.TemporaryDirectory(prefix="pytest-rvv-along-") as scratch:
            along = cell.runs.counting_along(Path(scratch)) if count and cell.runs is not None else None
            started = time.monotonic()
            outcome = runner.run(artifact, oracle.inputs, workdir, len(oracle.outputs), cell.timeout_s,
                                 qemu_args=(*qemu_args(tmp / output), *(along.qemu_args if along else ())))
            wall_s = time.monotonic() - started
            check_outputs(cell, runner, outcome.outputs, oracle, what)  # nothing is kept from a wrong result
            if along is not None:
                along.keep(outcome)
        return {"wall_s": round(wall_s, 3)}

    runs = cell.runs.runs if cell.runs is not None else None  # the session's (fresh with --rvv-no-cache)
    kept = runs.kept if runs is not None and runs.kept.store is cell.store else \
        KeptRuns(cell.store, fresh=runs is not None and runs.fresh)  # a cell handed another store keeps its runs there
    entry = kept.get_or_build(namespace, entry_key, emulate)
    if not entry.created:  # the stage of the same name (traffic, threads) counts a lookup as a hit, not as work
        cell.stages.hit(namespace)
    return PluginRun(entry.file(output), float(entry.meta["wall_s"]))


def check_outputs(cell: Cell, runner: Runner, outputs: list[np.ndarray], oracle: Oracle, what: str) -> None:
    """One RvvError naming the cell and the run (``what``) when ``outputs`` disagree with onnxruntime's."""
    agreement = compare(outputs, oracle.outputs, cell.model.tolerance, oracle.steps)
    if not agreement.ok:
        raise RvvError(f"{cell.model.name} on {runner.target.name} {what} disagrees with onnxruntime\n"
                       f"{agreement.report()}")
