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


@dataclass(frozen=True)
class Metric:
    """One metric: its kind for cross targets, unit and meaning."""

    name: str
    kind: str
    unit: str
    meaning: str
    work: bool = False  # executed work: ranks first in a review


METRICS: dict[str, Metric] = {m.name: m for m in (
    Metric("executed_dispatch_instructions", PORTABLE, "instr", "instructions executed in the dispatches", work=True),
    # what a call executes apart from what loading the module executes once (initializers: packing constant weights)
    Metric("executed_per_call_instructions", PORTABLE, "instr",
           "instructions the call executes in the dispatches (the run's, less the module load's)", work=True),
    Metric("executed_one_time_instructions", PORTABLE, "instr",
           "instructions the module load executes in dispatches once (initializers: packing constant weights)"),
    Metric("static_instructions", PORTABLE, "instr", "instructions in the dispatch code"),
    Metric("module_bytes", PORTABLE, "B", "size of the .vmfb"),
    Metric("dispatch_code_bytes", PORTABLE, "B", ".text of the dispatch libraries"),
    Metric("iree_peak_bytes", PORTABLE, "B", "IREE's peak allocation (HOST_LOCAL + DEVICE_LOCAL)"),
    # Peak RSS of the emulator, measured on two machines (another x86 CPU, same Debian 12 and QEMU
    # 10.0.2 build recipe): the 26 aarch64/host runs moved by -0.1 % ... +0.7 %, far inside its x1.25
    # allowance, while times moved 0.47x ... 1.46x. So it gates everywhere, with that ratio (the
    # QEMU version is part of the baseline's toolchain identity).
    Metric("peak_rss_kb", PORTABLE, "KiB", "peak RSS of the run (the emulator's under QEMU)"),
    Metric("wall_s_min", MACHINE_BOUND, "s", "fastest wall time of N runs", work=True),
    Metric("cpu_s_min", MACHINE_BOUND, "s", "fastest CPU time of N runs", work=True),
    Metric("wall_s_median", MACHINE_BOUND, "s", "median wall time (shown, not gated)"),
    Metric("cpu_s_median", MACHINE_BOUND, "s", "median CPU time (shown, not gated)"),
    Metric("compile_s", MACHINE_BOUND, "s", "the compiler's own CPU time (user + sys)"),
    # measured on a board (run/ssh_board.py): that board's own numbers, gated only against its baseline
    Metric("board_peak_rss_kb", MACHINE_BOUND, "KiB", "peak RSS of iree-run-module on the board (GNU time)"),
    Metric("board_cycles", MACHINE_BOUND, "cycles", "CPU cycles on the board (perf stat)", work=True),
    Metric("board_instructions", MACHINE_BOUND, "instr", "instructions retired on the board (perf stat)", work=True),
    Metric("static_vector", DIAGNOSTIC, "instr", "vector instructions in the dispatch code"),
    Metric("executed_dispatch_vector", DIAGNOSTIC, "instr", "vector instructions executed in the dispatches"),
    Metric("lane_occupancy_percent", DIAGNOSTIC, "%",
           "elements processed / VLMAX over the executed vector instructions in the dispatches (report runs)"),
)}
LANE_OCCUPANCY = "lane_occupancy_percent"


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
