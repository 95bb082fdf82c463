"""Every performance metric, its kind and its good direction, stated in one place.

- **portable**: no machine changes it for a cross target (compiled code, counts, sizes, IREE's own
  peak allocation). Kept in the committed baselines, gated on every machine.
- **machine-bound**: the machine changes it (wall, CPU and compile times, and everything of the
  ``host`` target, which compiles with ``-cpu=host``). Gated only against a baseline taken on the
  same machine (``baselines/performance/machines/<machine>/``); elsewhere shown as information.
- **diagnostic**: shown, never a verdict by itself (vector instruction counts: vector share can rise
  while the work doubles; the vectorization suite owns the "still vectorized" gate).

Every gated metric is better lower (fewer instructions, smaller, faster): a decrease is an
improvement, listed and passing, never a regression.
"""

from __future__ import annotations

from dataclasses import dataclass

from pytest_rvv.config.targets import HOST, Target

PORTABLE = "portable"
MACHINE_BOUND = "machine-bound"
DIAGNOSTIC = "diagnostic"


# Every metric's name, spelled here only
EXECUTED_DISPATCH_INSTRUCTIONS = "executed_dispatch_instructions"
EXECUTED_PER_CALL_INSTRUCTIONS = "executed_per_call_instructions"
EXECUTED_ONE_TIME_INSTRUCTIONS = "executed_one_time_instructions"
STATIC_INSTRUCTIONS = "static_instructions"
MODULE_BYTES = "module_bytes"
DISPATCH_CODE_BYTES = "dispatch_code_bytes"
IREE_PEAK_BYTES = "iree_peak_bytes"
PEAK_RSS_KB = "peak_rss_kb"
WALL_S_MIN = "wall_s_min"
CPU_S_MIN = "cpu_s_min"
WALL_S_MEDIAN = "wall_s_median"
CPU_S_MEDIAN = "cpu_s_median"
COMPILE_S = "compile_s"
BOARD_PEAK_RSS_KB = "board_peak_rss_kb"
BOARD_CYCLES = "board_cycles"
BOARD_INSTRUCTIONS = "board_instructions"
STATIC_VECTOR = "static_vector"
EXECUTED_DISPATCH_VECTOR = "executed_dispatch_vector"
LANE_OCCUPANCY = "lane_occupancy_percent"
WALL_S, CPU_S = "wall_s", "cpu_s"  # the samples (every timed run) behind the time metrics


@dataclass(frozen=True)
class Metric:
    """One metric: its kind for cross targets, unit and meaning."""

    name: str
    kind: str
    unit: str
    meaning: str
    work: bool = False  # executed work: ranks first in a review


METRICS: dict[str, Metric] = {m.name: m for m in (
    Metric(EXECUTED_DISPATCH_INSTRUCTIONS, PORTABLE, "instr", "instructions executed in the dispatches", work=True),
    # what a call executes apart from what loading the module executes once (initializers: packing constant weights)
    Metric(EXECUTED_PER_CALL_INSTRUCTIONS, PORTABLE, "instr",
           "instructions the call executes in the dispatches (the run's, less the module load's)", work=True),
    Metric(EXECUTED_ONE_TIME_INSTRUCTIONS, PORTABLE, "instr",
           "instructions the module load executes in dispatches once (initializers: packing constant weights)"),
    Metric(STATIC_INSTRUCTIONS, PORTABLE, "instr", "instructions in the dispatch code"),
    Metric(MODULE_BYTES, PORTABLE, "B", "size of the .vmfb"),
    Metric(DISPATCH_CODE_BYTES, PORTABLE, "B", ".text of the dispatch libraries"),
    Metric(IREE_PEAK_BYTES, PORTABLE, "B", "IREE's peak allocation (HOST_LOCAL + DEVICE_LOCAL)"),
    # Peak RSS of the emulator, measured on two machines (another x86 CPU, same Debian 12 and QEMU
    # 10.0.2 build recipe): the 26 aarch64/host runs moved by -0.1 % ... +0.7 %, far inside its x1.25
    # allowance, while times moved 0.47x ... 1.46x. So it gates everywhere, with that ratio (the
    # QEMU version is part of the baseline's toolchain identity).
    Metric(PEAK_RSS_KB, PORTABLE, "KiB", "peak RSS of the run (the emulator's under QEMU)"),
    Metric(WALL_S_MIN, MACHINE_BOUND, "s", "fastest wall time of N runs", work=True),
    Metric(CPU_S_MIN, MACHINE_BOUND, "s", "fastest CPU time of N runs", work=True),
    Metric(WALL_S_MEDIAN, MACHINE_BOUND, "s", "median wall time (shown, not gated)"),
    Metric(CPU_S_MEDIAN, MACHINE_BOUND, "s", "median CPU time (shown, not gated)"),
    Metric(COMPILE_S, MACHINE_BOUND, "s", "the compiler's own CPU time (user + sys)"),
    # measured on a board (run/ssh_board.py): that board's own numbers, gated only against its baseline
    Metric(BOARD_PEAK_RSS_KB, MACHINE_BOUND, "KiB", "peak RSS of iree-run-module on the board (GNU time)"),
    Metric(BOARD_CYCLES, MACHINE_BOUND, "cycles", "CPU cycles on the board (perf stat)", work=True),
    Metric(BOARD_INSTRUCTIONS, MACHINE_BOUND, "instr", "instructions retired on the board (perf stat)", work=True),
    Metric(STATIC_VECTOR, DIAGNOSTIC, "instr", "vector instructions in the dispatch code"),
    Metric(EXECUTED_DISPATCH_VECTOR, DIAGNOSTIC, "instr", "vector instructions executed in the dispatches"),
    Metric(LANE_OCCUPANCY, DIAGNOSTIC, "%",
           "elements processed / VLMAX over the executed vector instructions in the dispatches (report runs)"),
)}


SILICON = "est_cycles"  # est_cycles@<core>: estimated cycles on a silicon core (llvm-mca), one metric per core


def silicon_metric(core: str) -> str:
    return f"{SILICON}@{core}"


def metric_info(name: str) -> Metric | None:
    """The Metric of ``name``, per-core silicon estimates included."""
    family, _, core = name.partition("@")
    if family == SILICON and core:
        return Metric(name, PORTABLE, "cycles", f"estimated cycles on {core} (llvm-mca per executed block)",
                      work=True)
    return METRICS.get(name)


def kind_of(metric: str, target: Target) -> str:
    """The kind of ``metric`` on ``target``: everything of the ``host`` target is machine-bound."""
    known = metric_info(metric)
    kind = known.kind if known else PORTABLE
    if target.arch == HOST and kind == PORTABLE:
        return MACHINE_BOUND
    return kind


def split(metrics: dict[str, float], target: Target) -> dict[str, dict[str, float]]:
    """``metrics`` split by kind, diagnostics kept with the portable ones (they describe the same code)."""
    parts: dict[str, dict[str, float]] = {PORTABLE: {}, MACHINE_BOUND: {}}
    for name, value in metrics.items():
        kind = kind_of(name, target)
        parts[MACHINE_BOUND if kind == MACHINE_BOUND else PORTABLE][name] = value
    return parts


def ratio(a: float | None, b: float | None) -> float | None:
    """``a / b``; None without both (or with ``b`` zero)."""
    return a / b if a is not None and b else None
