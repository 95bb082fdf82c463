"""Tolerance policy per metric, and the comparison of a measurement with its baseline.

Which baseline a metric is compared with (portable or this machine's) is decided in
applicable.py; this module only judges. Every metric is better lower: an increase beyond the
allowance is a regression, a decrease beyond it an improvement (never a regression).
Deterministic metrics (instruction counts, sizes, IREE's peak allocation) must match exactly;
time and memory may grow by a ratio; time must also grow by more than 50 ms (start-up noise), and
needs a one-sided Mann-Whitney test to call a slowdown significant when both sides have enough
samples (noise on shared machines).
Override per metric in ``[tool.pytest_rvv.tolerances]``: ``wall_s_min = 1.5`` (a ratio; 0 = exact).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from pytest_rvv.base.errors import ConfigError
from pytest_rvv.judge.baselines import Baseline
from pytest_rvv.judge.outcome import Verdict, failed, passed
from pytest_rvv.measure.calibration import InstructionCalibration
from pytest_rvv.measure.metrics import (
    BOARD_CYCLES,
    BOARD_INSTRUCTIONS,
    BOARD_PEAK_RSS_KB,
    COMPILE_S,
    CPU_S,
    CPU_S_MEDIAN,
    CPU_S_MIN,
    DISPATCH_CODE_BYTES,
    EXECUTED_DISPATCH_INSTRUCTIONS,
    EXECUTED_DISPATCH_VECTOR,
    EXECUTED_ONE_TIME_INSTRUCTIONS,
    EXECUTED_PER_CALL_INSTRUCTIONS,
    IREE_PEAK_BYTES,
    MODULE_BYTES,
    PEAK_RSS_KB,
    SILICON,
    STATIC_INSTRUCTIONS,
    STATIC_VECTOR,
    WALL_S,
    WALL_S_MEDIAN,
    WALL_S_MIN,
)

EXACT = 0.0
INFO = math.inf  # recorded and shown, never failed
DEFAULT_TOLERANCES: dict[str, float] = {
    MODULE_BYTES: EXACT,
    DISPATCH_CODE_BYTES: EXACT,
    STATIC_INSTRUCTIONS: EXACT,
    STATIC_VECTOR: EXACT,
    EXECUTED_DISPATCH_INSTRUCTIONS: EXACT,
    EXECUTED_PER_CALL_INSTRUCTIONS: EXACT,
    EXECUTED_ONE_TIME_INSTRUCTIONS: EXACT,
    EXECUTED_DISPATCH_VECTOR: EXACT,
    IREE_PEAK_BYTES: EXACT,
    SILICON: EXACT,  # every est_cycles@<core>: deterministic (exact executed blocks, a fixed llvm-mca)
    PEAK_RSS_KB: 1.25,
    BOARD_PEAK_RSS_KB: 1.25,
    BOARD_CYCLES: 1.1,  # hardware counters on a real board: close, not exact
    BOARD_INSTRUCTIONS: 1.02,
    COMPILE_S: 3.0,  # compile time is noisy under parallel load; catches only blow-ups
    WALL_S_MIN: 1.3,
    WALL_S_MEDIAN: INFO,  # medians of a few runs under load swing too much to gate on
    CPU_S_MIN: 1.3,
    CPU_S_MEDIAN: INFO,
}
TIME_METRICS = {WALL_S_MIN: WALL_S, WALL_S_MEDIAN: WALL_S, CPU_S_MIN: CPU_S, CPU_S_MEDIAN: CPU_S}
XDIST_TIME_FACTOR = 1.5  # workers compete for the cores: widen time ratios under -n
TIME_FLOOR_S = 0.05  # a slowdown smaller than this is process start-up noise, whatever the ratio
MIN_SAMPLES_FOR_TEST = 5
SIGNIFICANCE = 0.05


def tolerances(table: Mapping[str, Any] | None, under_xdist: bool) -> dict[str, float]:
    """Defaults, overridden by ``[tool.pytest_rvv.tolerances]``, widened for time under xdist."""
    result = dict(DEFAULT_TOLERANCES)
    for name, value in (table or {}).items():
        if name not in DEFAULT_TOLERANCES:
            raise ConfigError(f"[tool.pytest_rvv.tolerances] {name}: unknown metric; known: "
                              f"{', '.join(DEFAULT_TOLERANCES)}")
        if not isinstance(value, int | float) or value < 0 or (0 < value < 1) or math.isinf(value):
            raise ConfigError(f"[tool.pytest_rvv.tolerances] {name}: give a ratio >= 1 (or 0 for exact)")
        result[name] = float(value)
    if under_xdist:
        for name in TIME_METRICS:
            result[name] *= XDIST_TIME_FACTOR
    return result


def mann_whitney_greater(now: list[float], base: list[float]) -> float:
    """One-sided p-value that ``now`` tends to be larger than ``base`` (normal approximation, ties averaged)."""
    pooled = sorted((v, i < len(now)) for i, v in enumerate([*now, *base]))
    ranks: list[float] = [0.0] * len(pooled)
    i = 0
    while i < len(pooled):
        j = i
        while j + 1 < len(pooled) and pooled[j + 1][0] == pooled[i][0]:
            j += 1
        for k in range(i, j + 1):
            ranks[k] = (i + j) / 2 + 1
        i = j + 1
    n1, n2 = len(now), len(base)
    u = sum(r for r, (_, is_now) in zip(ranks, pooled, strict=True) if is_now) - n1 * (n1 + 1) / 2
    mean, sd = n1 * n2 / 2, math.sqrt(n1 * n2 * (n1 + n2 + 1) / 12)
    return 0.5 * math.erfc((u - mean) / sd / math.sqrt(2)) if sd else 1.0


REGRESSED = "REGRESSED"
IMPROVED = "improved"
CHANGED = "changed"  # a diagnostic moved: shown, not a verdict
OK = "ok"


@dataclass(frozen=True)
class Row:
    """One metric's verdict: baseline, now, the allowance and whether it regressed or improved."""

    metric: str
    baseline: float | None
    now: float | None
    allowed: float
    status: str = OK
    note: str = ""

    @property
    def ok(self) -> bool:
        """Only a regression fails (improvements and diagnostic changes pass unless strict)."""
        return self.status != REGRESSED

    @property
    def differs(self) -> bool:
        """Anything --rvv-strict-baselines refuses: an improvement or a changed diagnostic."""
        return self.status in (IMPROVED, CHANGED)

    def change(self) -> str:
        if self.baseline in (None, 0) or self.now is None:
            return "n/a"
        return f"{(self.now - self.baseline) / self.baseline * 100:+.1f}%"

    def added(self) -> float:
        """How much this row adds, relative to its baseline (ranks a review: most added work first)."""
        if not self.baseline or self.now is None:
            return 0.0
        return (self.now - self.baseline) / self.baseline

    def allowance(self) -> str:
        if self.allowed == EXACT:
            return "exact"
        return "info" if self.allowed == INFO else f"x{self.allowed:g}"


def compare(baseline: Baseline, now_metrics: Mapping[str, float], now_samples: Mapping[str, list[float]],
            limits: Mapping[str, float], diagnostics: frozenset[str] = frozenset()) -> list[Row]:
    """One row per metric present on both sides; every metric is better lower.

    Exact metrics: higher is REGRESSED, lower is improved. Ratio metrics: higher beyond the ratio
    (and, for time, beyond the noise floor and significantly when there are enough samples) is
    REGRESSED, lower beyond the same band is improved. ``diagnostics`` only ever "change".
    """
    rows = []
    base_metrics, base_samples = baseline.metrics, baseline.samples or {}
    for metric in sorted(set(base_metrics) & set(now_metrics)):
        old, new = base_metrics[metric], now_metrics[metric]
        limit = limits.get(metric, limits.get(metric.partition("@")[0], EXACT))
        if metric in diagnostics:
            rows.append(Row(metric, old, new, INFO, CHANGED if new != old else OK))
            continue
        if limit == EXACT:
            rows.append(Row(metric, old, new, limit, OK if new == old else (REGRESSED if new > old else IMPROVED)))
            continue
        if limit == INFO:
            rows.append(Row(metric, old, new, limit))
            continue
        sample_key = TIME_METRICS.get(metric)
        floor = TIME_FLOOR_S if sample_key is not None else 0.0
        moved = round(new - old, 9)  # to the nanosecond: a move of exactly the floor is within it
        slower = new > old * limit and moved > floor
        faster = new * limit < old and -moved > floor
        note = ""
        if slower and sample_key:
            a, b = now_samples.get(sample_key, []), base_samples.get(sample_key, [])
            if len(a) >= MIN_SAMPLES_FOR_TEST and len(b) >= MIN_SAMPLES_FOR_TEST:
                p = mann_whitney_greater(a, b)
                note = f"p={p:.3f}"
                slower = p < SIGNIFICANCE  # slower beyond the ratio, but not significantly: noise
        rows.append(Row(metric, old, new, limit, REGRESSED if slower else (IMPROVED if faster else OK), note))
    return _load_is_not_a_slowdown(rows)


def _load_is_not_a_slowdown(rows: list[Row]) -> list[Row]:
    """A wall time that regressed while the CPU time of the same runs did not is the machine's load
    (runs are one thread, local-sync: their own work is their CPU time), not slower code."""
    by_metric = {r.metric: r for r in rows}
    out = []
    for row in rows:
        cpu = by_metric.get(row.metric.replace("wall_s", "cpu_s"))
        if row.metric.startswith("wall_s") and row.status == REGRESSED and cpu is not None and cpu.status != REGRESSED:
            row = replace(row, status=OK, note=f"wall slower but CPU time {cpu.change()}: load on the machine, "
                                               "not slower code")
        out.append(row)
    return out


def table(rows: list[Row]) -> str:
    """The verdict table: metric, baseline, now, change, allowed, verdict (regressions first)."""
    order = {REGRESSED: 0, IMPROVED: 1, CHANGED: 2, OK: 3}
    lines = [f"{'metric':32} {'baseline':>14} {'now':>14} {'change':>9} {'allowed':>8}  verdict"]
    for r in sorted(rows, key=lambda r: (order[r.status], -r.added())):
        lines.append(f"{r.metric:32} {_fmt(r.baseline):>14} {_fmt(r.now):>14} {r.change():>9} {r.allowance():>8}  "
                     f"{r.status}{' ' + r.note if r.note else ''}")
    return "\n".join(lines)


def _fmt(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.4g}" if isinstance(value, float) and not float(value).is_integer() else f"{int(value)}"


# The silicon estimator per instruction against a published measurement of the core (measure/calibration.py): its
# cycles per instruction may differ by this many percent (unit-stride loads and stores, measured on X60: -13 to +28 %;
# FP and widening MACs, gathers: within 0.1 %). LLVM's model and the measurement are both fixed, so the outcome is
# the same on every machine; it moves only with llvm-mca.
ESTIMATOR_TOLERANCE_PERCENT = 30.0


def estimator_verdict(found: InstructionCalibration) -> Verdict:
    """The estimator against one published per-instruction measurement: fails when its cycles per instruction differ
    by more than ``ESTIMATOR_TOLERANCE_PERCENT``; records the comparison either way."""
    timing = found.timing
    if abs(found.error_percent) <= ESTIMATOR_TOLERANCE_PERCENT:
        return passed(estimator=found.as_json())
    return failed(f"{timing.core} {timing.name}: estimated {found.estimated:.2f} cycles per instruction, measured "
                  f"{timing.cycles:.2f} ({found.error_percent:+.0f} %, allowed +-{ESTIMATOR_TOLERANCE_PERCENT:g} %; "
                  f"{found.llvm_mca}); {timing.source}", estimator=found.as_json())


WALL_TOLERANCE_PERCENT = 30.0  # a published wall-time ratio: the estimate's ratio within +-30 % of its range


def wall_ratio_error(estimated: float, low: float, high: float) -> float:
    """Percent by which ``estimated`` lies outside the measured range ``low``-``high`` (0 inside it)."""
    if low <= estimated <= high:
        return 0.0
    return (estimated / (low if estimated < low else high) - 1) * 100


def wall_row_verdict(label: str, estimated: float, low: float, high: float, hidden: float | None = None,
                     **records: Any) -> Verdict:
    """The estimated wall-time ratio of a published row's two sides against the measured one: fails beyond
    ``WALL_TOLERANCE_PERCENT`` of the measured range; records the comparison either way. ``hidden``: the ratio with
    every DRAM miss's latency hidden (measure/walltime.py ``overlapped_seconds``), named in a failure as a diagnostic
    (which term decides), never judged."""
    error = wall_ratio_error(estimated, low, high)
    measured = f"{low:.2f}" + (f"-{high:.2f}" if high != low else "")
    if abs(error) <= WALL_TOLERANCE_PERCENT:
        return passed(**records)
    diagnostic = "" if hidden is None else (f"; with every DRAM miss's latency hidden {hidden:.2f}x "
                                            f"({wall_ratio_error(hidden, low, high):+.0f} %)")
    return failed(f"{label}: estimated wall-time ratio {estimated:.2f}x, measured {measured} ({error:+.0f} %, "
                  f"allowed +-{WALL_TOLERANCE_PERCENT:g} %){diagnostic}", **records)
