"""The wall-time estimate (measure/walltime.py) held against the published X60 rows: iree issue 24932's four f32
shapes at 8 threads (inner-tiled / ukernel, the ukernel side compiled as the issue does: ``--iree-opt-data-tiling
--iree-llvmcpu-enable-ukernels=all --iree-llvmcpu-enable-inner-tiled=false``) and iree PR 22231's f16 1024^3 at one
thread (default / mmt4d, the kernel suite's ``1024x1024x1024,f16f16f32`` cells: its own function, features and flags).

Opt-in (not part of .ci/run): every cell runs under QEMU twice (work per thread, memory traffic), cached in the
store; cold, about 15 min on 2 cores (the 1024^3 cells are most of it).

    PYTHONPATH=. .venv/bin/python scripts/walltime_calibration.py [--split even|measured] [--detail]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from pytest_rvv.config.cores import CORES
from pytest_rvv.config.kernels import kernels
from pytest_rvv.config.settings import Settings, default_cache_dir
from pytest_rvv.config.targets import BUILTIN_TARGETS, target_from_table
from pytest_rvv.measure.threads import ThreadProfile, measure_threads
from pytest_rvv.measure.traffic import measure_traffic
from pytest_rvv.measure.walltime import WallEstimate, estimate_wall
from pytest_rvv.session import Cell, RvvSession

X60 = CORES["spacemit-x60"]
UKERNELS_ALL = ("--iree-opt-data-tiling", "--iree-llvmcpu-enable-ukernels=all",
                "--iree-llvmcpu-enable-inner-tiled=false")
# (label, shape, row, (path or "ukernels-all") x 2, threads, board's ratio low, high)
ROWS = (
    *((f"24932 {s} 8 thr inner-tiled / ukernel", s, "f32", ("inner-tiled", "ukernels-all"), 8, lo, hi)
      for s, lo, hi in (("64x64x64", 1.02, 1.07), ("256x256x256", 1.78, 1.85), ("81x41x19", 0.82, 0.90),
                        ("540x516x332", 2.42, 2.42))),
    ("22231 1024^3 f16 1 thr default / mmt4d", "1024x1024x1024", "f16f16f32", ("default", "mmt4d"), 1, 4.48, 4.48),
)


def cell(session: RvvSession, shape: str, row: str, path: str) -> Cell:
    kernel = next(c for c in kernels({}, f"{shape},{row}", BUILTIN_TARGETS).cells
                  if c.path == ("default" if path == "ukernels-all" else path))
    target = kernel.target
    if path == "ukernels-all":
        target = target_from_table(f"{target.name}-ukall", {"extends": target.name, "extra-flags": list(UKERNELS_ALL)},
                                   BUILTIN_TARGETS)
    return session.cell(kernel.model, target, session.runner(target))


def in_core(profile: ThreadProfile, split: str) -> int:
    """The old estimate: in-core cycles and the runtime's work on the critical path, no memory."""
    cycles = profile.dispatch_cycles if split == "measured" else profile.even_cycles
    return sum(cycles(name, X60.name) for name in profile.dispatches)


def error(estimate: float, low: float, high: float) -> float:
    return 0.0 if low <= estimate <= high else (estimate / (low if estimate < low else high) - 1) * 100


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--split", choices=("even", "measured"), default="even")
    parser.add_argument("--detail", action="store_true", help="print each side's per-dispatch estimate")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="walltime-"))
    session = RvvSession(Settings.resolve(lambda option: None, {"cache-dir": str(default_cache_dir())}, work))
    print(f"{'row':<44} {'board':>9} {'old':>6} {'new':>6} {'error':>6}  bound by (each side)")
    for label, shape, row, paths, threads, low, high in ROWS:
        walls: list[WallEstimate] = []
        old = []
        for path in paths:
            c = cell(session, shape, row, path)
            profile = measure_threads(c, work / f"{shape}-{path}-t", threads, cores=(X60,))
            walls.append(estimate_wall(profile, measure_traffic(c, work / f"{shape}-{path}-m", X60.name), X60,
                                       args.split))
            old.append(in_core(profile, args.split))
        new = walls[0].seconds / walls[1].seconds
        board = f"{low}-{high}" if low != high else f"{low}"
        print(f"{label:<44} {board:>9} {old[0] / old[1]:>6.2f} {new:>6.2f} {error(new, low, high):>+5.0f}%  "
              f"{walls[0].bound_by} / {walls[1].bound_by}  ({walls[0].seconds * 1e3:.3f} / "
              f"{walls[1].seconds * 1e3:.3f} ms)")
        if args.detail:
            for wall in walls:
                print(wall.table())


if __name__ == "__main__":
    main()
