"""Numeric agreement between a module's outputs and the reference outputs."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from pytest_rvv.model.model import Model, Tolerance
from pytest_rvv.run.peer_runner import EmulatedPeerRunner
from pytest_rvv.run.recorded import PLAIN
from pytest_rvv.session import Cell, Oracle

WORST_SHOWN = 5


@dataclass(frozen=True)
class OutputAgreement:
    """How one output tensor compares: error maxima, mismatch count and the worst elements."""

    index: int
    shape: tuple[int, ...]
    max_abs: float
    max_rel: float
    mismatches: int
    size: int
    worst: list[tuple[tuple[int, ...], float, float]] = field(default_factory=list)  # (index, actual, expected)
    problem: str = ""  # shape/dtype/NaN issue that makes element errors meaningless
    step: float | None = None  # the output's quantization step (int8 models), None for a float output

    @property
    def max_steps(self) -> float | None:
        """The largest error in quantization steps (int8 outputs)."""
        return self.max_abs / self.step if self.step else None

    @property
    def ok(self) -> bool:
        return not self.problem and self.mismatches == 0

    def describe(self) -> str:
        if self.problem:
            return f"output {self.index}: {self.problem}"
        share = 100.0 * self.mismatches / max(self.size, 1)
        steps = f" ({self.max_steps:.3g} quantization steps of {self.step:.3g})" if self.step else ""
        text = (f"output {self.index} {list(self.shape)}: max abs err {self.max_abs:.3g}{steps}, max rel err "
                f"{self.max_rel:.3g}, {self.mismatches}/{self.size} elements mismatch ({share:.2f}%)")
        if self.worst and self.mismatches:
            text += "\n  worst: " + "; ".join(
                f"{list(i)} got {a:.6g} want {e:.6g}" for i, a, e in self.worst)
        return text


@dataclass(frozen=True)
class Agreement:
    """Comparison of every output, with the tolerance that was applied."""

    outputs: list[OutputAgreement]
    tolerance: Tolerance

    @property
    def ok(self) -> bool:
        return all(o.ok for o in self.outputs)

    @property
    def max_abs(self) -> float:
        return max((o.max_abs for o in self.outputs), default=0.0)

    @property
    def max_steps(self) -> float | None:
        """The largest error in quantization steps over the quantized outputs (None: no quantized output)."""
        found = [o.max_steps for o in self.outputs if o.max_steps is not None]
        return max(found) if found else None

    def report(self) -> str:
        head = f"tolerance {self.tolerance.describe()}"
        return "\n".join([head, *(o.describe() for o in self.outputs)])


def compare(actual: list[np.ndarray], expected: list[np.ndarray], tolerance: Tolerance,
            steps: Sequence[float | None] = ()) -> Agreement:
    """Compare outputs elementwise: mismatch when ``|a - e| > atol + steps * step + rtol * |e|`` (NaN vs NaN
    agrees); ``steps`` holds each output's quantization step (None or missing: a float output)."""
    if len(actual) != len(expected):
        problem = f"got {len(actual)} outputs, onnxruntime gave {len(expected)}"
        return Agreement([OutputAgreement(0, (), np.inf, np.inf, 1, 1, problem=problem)], tolerance)
    return Agreement([_compare_one(i, a, e, tolerance, steps[i] if i < len(steps) else None)
                      for i, (a, e) in enumerate(zip(actual, expected, strict=True))], tolerance)


def _compare_one(index: int, actual: np.ndarray, expected: np.ndarray, tol: Tolerance,
                 step: float | None) -> OutputAgreement:
    shape = tuple(expected.shape)
    if actual.shape != expected.shape:
        return OutputAgreement(index, shape, np.inf, np.inf, expected.size, expected.size,
                               problem=f"shape {list(actual.shape)} != expected {list(shape)}")
    if actual.dtype.kind != expected.dtype.kind:
        return OutputAgreement(index, shape, np.inf, np.inf, expected.size, expected.size,
                               problem=f"dtype {actual.dtype} != expected {expected.dtype}")
    a = actual.astype(np.float64)
    e = expected.astype(np.float64)
    atol = tol.atol + (tol.steps * step if step else 0.0)
    same = (a == e) | (np.isnan(a) & np.isnan(e))  # equal infinities and NaN vs NaN agree
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.where(same, 0.0, np.abs(a - e))
        diff = np.where(np.isnan(diff), np.inf, diff)
        # relative error where the reference is not negligible (|e| > atol), else it is meaningless
        meaningful = np.isfinite(e) & (np.abs(e) > max(atol, np.finfo(np.float64).tiny))
        rel = np.where(meaningful, diff / np.where(meaningful, np.abs(e), 1.0), 0.0)
    with np.errstate(invalid="ignore"):
        bad = ~same & ((diff > atol + tol.rtol * np.abs(e)) | ~np.isfinite(a) | ~np.isfinite(e))
    order = np.argsort(diff, axis=None, kind="stable")[::-1][:WORST_SHOWN]
    worst = [(tuple(int(x) for x in np.unravel_index(i, shape)), float(a.flat[i]), float(e.flat[i]))
             for i in order if bad.flat[i]]
    return OutputAgreement(
        index=index, shape=shape,
        max_abs=float(diff.max()) if diff.size else 0.0,
        max_rel=float(rel.max()) if diff.size else 0.0,
        mismatches=int(bad.sum()), size=int(expected.size), worst=worst, step=step,
    )


def peer_agreement(runs: Sequence[list[np.ndarray]], oracle: Oracle, model: Model,
                   runner: EmulatedPeerRunner) -> list[Agreement]:
    """Each run's outputs (a peer's, on the oracle's inputs) against onnxruntime's: by the model's tolerance, or where
    the peer computes otherwise (ggml's q8_0 weights round the input it quantizes) by its own bound of the exact
    result, floats against floats (the bound asked once for all the runs)."""
    own = runner.tolerance(oracle.prepared, oracle.inputs)
    if own is None:
        return [compare(outputs, oracle.outputs, model.tolerance, oracle.steps) for outputs in runs]
    expected = [e.astype(np.float64) for e in oracle.outputs]
    return [compare(outputs, expected, own, oracle.steps) for outputs in runs]


@dataclass(frozen=True)
class CheckedRun:
    """One run's outputs held against onnxruntime's: what ran, which run it was (said after "disagrees with
    onnxruntime", e.g. " in the counted run") and the command that repeats it (None: not shown). judge/ decides."""

    model: str
    target: str
    agreement: Agreement
    run: str = ""
    repro: str | None = None


def measure_agreement(cell: Cell, workdir: Path) -> CheckedRun:
    """Run the cell's module (an emulated target's plain run is recorded by content, shared with the performance
    check) and hold its outputs against onnxruntime's."""
    runner, oracle = cell.given()
    recorded = cell.recorded(PLAIN, workdir)
    if recorded is not None:
        outputs, repro = recorded.outputs, recorded.repro
    else:
        outcome = runner.run(cell.artifact, oracle.inputs, workdir, len(oracle.outputs), cell.timeout_s)
        outputs, repro = outcome.outputs, outcome.repro
    return CheckedRun(cell.model.name, cell.target.name,
                      compare(outputs, oracle.outputs, cell.model.tolerance, oracle.steps), repro=repro)
