"""The kernel dashboard: per row (element type) x shape, every matmul path side by side (iree issue 24932's layout),
and the estimator held against published silicon (the calibration table).

Only formatting: the numbers are the performance records of the kernel cells (estimated cycles on the row's core,
executed instructions, vsetvl*/vrgather executed per dispatch) and ``PUBLISHED``'s measurements.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from pytest_rvv.config.cores import CORES
from pytest_rvv.config.kernels import CORE, KernelCell
from pytest_rvv.config.paths import DEFAULT, PATHS
from pytest_rvv.judge.policy import wall_ratio_error
from pytest_rvv.measure.metrics import (
    EXECUTED_DISPATCH_INSTRUCTIONS,
    EXECUTED_DISPATCH_VECTOR,
    EXECUTED_ONE_TIME_INSTRUCTIONS,
    EXECUTED_PER_CALL_INSTRUCTIONS,
    IREE_PEAK_BYTES,
    ratio,
    silicon_metric,
)
from pytest_rvv.measure.peers import PeerRow
from pytest_rvv.measure.performance import CalibrationPoint, PerfResult


@dataclass(frozen=True)
class Configuration:
    """What a published measurement ran, quoted from its source: each side's compile flags (beyond target triple,
    ABI and features; ``over``'s order), the CPU features, threads, and what the function takes. ``differs`` names
    every way our two cells are not that program (tests/test_kernels.py holds the flags and features to the quotes,
    so this list cannot go stale); () when they reproduce it exactly."""

    flags: tuple[str, str]
    features: str
    threads: int
    operands: str
    differs: tuple[str, ...] = ()


@dataclass(frozen=True)
class RowToolchain:
    """The compiler a published row reproduces: an ``iree-base-compiler`` release from the package index, or None
    (``CURRENT``) for the toolchain under test; ``why`` says which the evidence supports and why."""

    release: str | None
    why: str

    @property
    def spec(self) -> str | None:
        """The pip requirement that fetches it (None: the toolchain under test)."""
        return None if self.release is None else f"iree-base-compiler=={self.release}"

    @property
    def label(self) -> str:
        return "current" if self.release is None else self.release


@dataclass(frozen=True)
class Published:
    """A published silicon measurement of a kernel cell: the ratio of two paths' times, with its source, the
    configuration it ran and the compiler that made its code."""

    row: str
    shape: str
    over: tuple[str, str]  # (path, path): the ratio over[0] / over[1]
    low: float
    high: float
    source: str
    how: str
    config: Configuration
    toolchain: RowToolchain

    @property
    def id(self) -> str:
        release = "" if self.toolchain.release is None else f"-iree{self.toolchain.release}"
        return f"{self.row}-{self.shape}-{self.over[0]}-over-{self.over[1]}{release}"


ISSUE_24932 = ("iree issue 24932 (SpaceMiT X60, 8 cores @ 1.6 GHz, iree-benchmark-module --device=local-task, "
               "10 repetitions)")
# iree issue 24932's "Setup", quoted: its "inner_tiled" and "ukernel" compiles, features (f32: no dtype extras)
ISSUE_24932_CONFIG = Configuration(
    ("--iree-opt-data-tiling --iree-llvmcpu-enable-ukernels=none --iree-llvmcpu-enable-inner-tiled=true",
     "--iree-opt-data-tiling --iree-llvmcpu-enable-ukernels=all --iree-llvmcpu-enable-inner-tiled=false"),
    "+m,+a,+f,+d,+c,+v,+zvl256b", 8,
    "not stated (its shapes only); ours: A and B function arguments, packed per call",
    ("the in-core estimate is one thread (local-sync); the board ran 8 (the est. wall time runs 8 local-task "
     "workers under QEMU)",))
PR_22231 = ("iree PR 22231 (+zvl256b,+v,+zfhmin,+zvfhmin, as the X60; the board is not named), "
            "f16 matmul")
# iree PR 22231's "Benchmarking (Single Thread)", Zvfhmin, f16xf16->f32: its compile flags (the no-data-tiling
# side is those without --iree-opt-data-tiling: the PR gives one command and two columns)
PR_22231_CONFIG = Configuration(
    ("--mlir-print-ir-after-all --iree-llvmcpu-enable-ukernels=mmt4d --riscv-v-fixed-length-vector-lmul-max=8",
     "--iree-opt-data-tiling --mlir-print-ir-after-all --iree-llvmcpu-enable-ukernels=mmt4d "
     "--riscv-v-fixed-length-vector-lmul-max=8"),
    "+m,+a,+f,+d,+zvl256b,+v,+zfhmin,+zvfhmin", 1,
    "linalg.matmul f16 x f16 -> f32 accumulating into an f32 argument, all three dynamic (tensor<?x?x...>): "
    "ours is that function, compiled from its MLIR",
    ("flags: ours pass no --riscv-v-fixed-length-vector-lmul-max=8 (LLVM's default: cl::init(8); iree-compile 3.12.0 "
     "and later reject the option, and with 3.11.0 the modules are byte-identical with and without it)",))
# iree issue 24932 names no build. Filed 2026-09-14, the day iree PR 24933 (the f32 `vfmacc.vf` inner_tiled lowering,
# "Performance will be tracked here #24932") opened; its board rows are reproduced with both candidate compilers.
ISSUE_24932_THEN = RowToolchain(
    "3.12.0", "the release nearest the issue's date (3.12.0rc20260917, three days after it) emits the older generic "
    "3x3 inner_tiled MMA (vfmacc.vf at mf2, VL=3); the evidence supports it: with its code the estimated direction is "
    "right where the two sides' work differs most (docs/kernels.md)")
ISSUE_24932_NOW = RowToolchain(
    None, "the toolchain under test (3.13.0 has PR 24933's vfmacc.vf lowering): what today's compiler would do on the "
    "board, not what the board ran (its ukernels=all side is byte-identical to 3.12.0's)")
# iree PR 22231's board ran its own branch's build of 2025-10-07, which no release holds. The PR was merged on
# 2025-10-24 (f4fb50a1); the first release with it is 3.9.0 (3.8.0's commit of 2025-10-09 predates the merge), and its
# f16 ukernels and f16 tile choice are unchanged from the merge through IREE main of 2026-08-21 (git diff, measured)
PR_22231_THEN = RowToolchain(
    "3.9.0", "the first release with the PR's code (merged 2025-10-24; 3.9.0 of 2025-11-25; 3.8.0 predates the merge): "
    "its f16 mmt4d ukernels and tile choice are the merge's; the board ran the branch's build of 2025-10-07, "
    "which no release holds")
PR_22231_NOW = RowToolchain(
    None, "the toolchain under test: its f16 ukernels and tile choice are the merge's too (unchanged through IREE main "
    "of 2026-08-21), its LLVM and codegen two years' newer")
PUBLISHED = (
    *(Published("f32", shape, ("inner-tiled", "ukernels-all"), low, high, ISSUE_24932, "wall time, 8 threads",
                ISSUE_24932_CONFIG, toolchain)
      for toolchain in (ISSUE_24932_THEN, ISSUE_24932_NOW)
      for shape, low, high in (("64x64x64", 1.02, 1.07), ("256x256x256", 1.78, 1.85), ("81x41x19", 0.82, 0.90),
                               ("540x516x332", 2.42, 2.42))),
    # 1030 ms without data tiling, 230 ms with data tiling + mmt4d
    *(Published("f16f16f32", "1024x1024x1024", ("default", "mmt4d"), 1030 / 230, 1030 / 230, PR_22231,
                "wall time, 1 thread: 1030 ms / 230 ms", PR_22231_CONFIG, toolchain)
      for toolchain in (PR_22231_THEN, PR_22231_NOW)),
    # 15326 ms without data tiling, 1835 ms with data tiling + mmt4d (the PR's "Square Matrix Size" 2048)
    *(Published("f16f16f32", "2048x2048x2048", ("default", "mmt4d"), 15326 / 1835, 15326 / 1835, PR_22231,
                "wall time, 1 thread: 15326 ms / 1835 ms", PR_22231_CONFIG, toolchain)
      for toolchain in (PR_22231_THEN, PR_22231_NOW)),
)


# the published rows the estimated wall time (measure/walltime.py) is known to miss by more than +-30 %, each with
# the measured reason (docs/kernels.md, "Estimated wall time"); their tests are strict expected failures
_SCALAR_PACKS = ("with 3.13's code (PR 24933's vfmacc.vf inner_tiled) the =all side runs IREE's generic scalar "
                 "pack/unpack ukernels and executes 2.5-3.6x inner-tiled's instructions")
WALL_MISSES: dict[str, str] = {  # by Published.id
    "f32-64x64x64-inner-tiled-over-ukernels-all":
        f"{_SCALAR_PACKS} (385k / 111k) and no L2 miss occurs at 64^3: compute-bound on both sides, the model cannot "
        "make inner-tiled slower (est. 0.29x, board 1.02-1.07); see docs/kernels.md",
    "f32-256x256x256-inner-tiled-over-ukernels-all":
        f"{_SCALAR_PACKS}; at 256^3 both sides stay compute-bound (2.1 / 2.7 MB from DRAM per call): est. 0.68x, "
        "board 1.78-1.85; see docs/kernels.md",
    "f32-81x41x19-inner-tiled-over-ukernels-all":
        f"{_SCALAR_PACKS} and no L2 miss occurs at 81x41x19: compute-bound on both sides (est. 0.25x, board "
        "0.82-0.90); see docs/kernels.md",
    "f32-81x41x19-inner-tiled-over-ukernels-all-iree3.12.0":
        "est. 0.29x (0.016 / 0.056 ms), board 0.82-0.90: both sides compute-bound with no DRAM traffic, and the model "
        "has no per-call cost measured on silicon; one common to both sides on the board (waking 8 workers, the "
        "dispatch) would pull a ratio of calls this short toward 1; see docs/kernels.md",
    "f32-540x516x332-inner-tiled-over-ukernels-all-iree3.12.0":
        "est. 4.27x (28.5 / 6.66 ms), board 2.42: in-core the two sides are 2.5x apart (15.0 M / 6.0 M cycles), but "
        "inner-tiled is DRAM-bound: even with every miss's latency hidden it is 3.73x, set by the bytes a one-thread "
        "run through one private L2 counts (about 132 MB per call) over the 7 GB/s channel, where the board's 8 "
        "workers have two L2s; the same term lets 3.13's row pass at -23 %; see docs/kernels.md",
    "f16f16f32-1024x1024x1024-default-over-mmt4d-iree3.9.0":
        "est. 2.79x (885 / 318 ms), board 4.48 (1030 / 230 ms): with 3.9.0's code the default side lands 14 % under "
        "the board and the mmt4d side 38 % over it, both compute-bound; with 3.13.0's the row holds (4.96x: 1381 / "
        "279 ms, +11 %), so the two releases' default paths differ by 1.56x in est. time; see docs/kernels.md",
    "f16f16f32-2048x2048x2048-default-over-mmt4d":
        "est. 5.40x (11367 / 2104 ms), board 8.35 (15326 / 1835 ms), both sides compute-bound: the default side lands "
        "26 % under the board and the mmt4d side 15 % over it; in-core alone the ratio is 6.67x (-20 %): the "
        "model's memory and runtime terms (no prefetcher; 2.17 GB / 0.52 GB from DRAM per call) add more to "
        "mmt4d's time in proportion; see docs/kernels.md",
    "f16f16f32-2048x2048x2048-default-over-mmt4d-iree3.9.0":
        "est. 3.05x (7195 / 2357 ms), board 8.35 (15326 / 1835 ms), both sides compute-bound: the default side lands "
        "53 % under the board and the mmt4d side 28 % over it. From 1024^3 to 2048^3 (8x the work) the board's default "
        "side took 14.9x as long, the model's 8.1x (8.2x with 3.13.0): something the model leaves out grows with the "
        "unpacked path's size; see docs/kernels.md",
}


def selected_published(cells: Sequence[KernelCell]) -> tuple[Published, ...]:
    """The published rows whose two sides are both among ``cells`` (the selected kernel cells)."""
    have = {(c.row, c.shape.name, c.path) for c in cells}
    return tuple(p for p in PUBLISHED if all((p.row, p.shape, path) in have for path in p.over))


def _index(cells: Sequence[KernelCell], perf: dict[tuple[str, str], PerfResult]
           ) -> dict[tuple[str, str], dict[str, PerfResult]]:
    """(row, shape) -> path -> the cell's performance record, for the cells that have one."""
    found: dict[tuple[str, str], dict[str, PerfResult]] = {}
    for c in cells:
        record = perf.get((c.model.name, c.target.name))
        if record is not None:
            found.setdefault((c.row, c.shape.name), {})[c.path] = record
    return found


def _value(record: PerfResult | None, metric: str) -> float | None:
    """A per-call value: estimated cycles less the module load's, executed instructions of the call alone."""
    if record is None:
        return None
    metrics = record.metrics
    if metric == EXECUTED_DISPATCH_INSTRUCTIONS:
        return metrics.get(EXECUTED_PER_CALL_INSTRUCTIONS, metrics.get(EXECUTED_DISPATCH_INSTRUCTIONS))
    return record.per_call_cycles(metric.partition("@")[2])


def _x(ratio: float | None) -> str:
    return "-" if ratio is None else f"{ratio:.2f}x"


@dataclass(frozen=True)
class PathWall:
    """A path's estimated wall time of one call per thread count (``"1"``, ``"8"``), what bounds it at each, and the
    same with every DRAM miss's latency hidden (measure/walltime.py)."""

    ms: dict[str, float]
    bound_by: dict[str, str]
    hidden_ms: dict[str, float]


@dataclass(frozen=True)
class KernelPath:
    """One path of a row x shape: per call, the estimated cycles on the row's core and executed instructions, what the
    module load does once, the dispatches' vector share, vsetvl*, vrgather and spilled vector registers executed, the
    matmul's workgroups, DRAM bytes and L2 misses on the core's modelled caches (one thread; None: not measured), and
    its ratios to the default path; a run on silicon (a bundle's) and the estimated wall time when there are."""

    target: str
    est_cycles: float | None
    executed: float | None
    one_time_est_cycles: float
    one_time_executed: float
    iree_peak_bytes: float | None
    vector_percent: float | None
    vsetvl: int
    vrgather: int
    spilled_registers: int
    workgroups: int | None
    dram_bytes: float | None
    l2_misses: float | None
    est_vs_default: float | None
    executed_vs_default: float | None
    silicon: CalibrationPoint | None = None
    wall: PathWall | None = None

    def to_json(self) -> dict[str, Any]:
        """results.json's path record (``kernels.dashboard[].paths``)."""
        out: dict[str, Any] = {
            "target": self.target, "est_cycles": self.est_cycles, "executed": self.executed,
            "one_time_est_cycles": self.one_time_est_cycles, "one_time_executed": self.one_time_executed,
            "iree_peak_bytes": self.iree_peak_bytes, "vector_percent": self.vector_percent, "vsetvl": self.vsetvl,
            "vrgather": self.vrgather, "spilled_registers": self.spilled_registers, "workgroups": self.workgroups,
            "dram_bytes": self.dram_bytes, "l2_misses": self.l2_misses, "est_vs_default": self.est_vs_default,
            "executed_vs_default": self.executed_vs_default}
        if self.silicon is not None:
            out["silicon_run"] = silicon_run(self.silicon)
        if self.wall is not None:
            out |= {"est_wall_ms": self.wall.ms, "bound_by": self.wall.bound_by,
                    "est_wall_hidden_ms": self.wall.hidden_ms}
        return out


@dataclass(frozen=True)
class PeerBeside:
    """A peer's call beside a row x shape's paths (its work is the same on every path's target)."""

    peer: str
    est_cycles: float | None
    executed: float | None
    vector_percent: float | None
    est_vs_default: float | None

    def to_json(self) -> dict[str, Any]:
        return {"peer": self.peer, "est_cycles": self.est_cycles, "executed": self.executed,
                "vector_percent": self.vector_percent, "est_vs_default": self.est_vs_default}


@dataclass(frozen=True)
class PinnedRow:
    """A published row estimated with the release it is pinned to (its test records it): the compiler, and each side's
    estimated wall ms at the source's threads (in the ratio's order), with DRAM latency hidden, and what bounds it."""

    id: str
    compiler: str
    wall_ms: list[float]
    wall_hidden_ms: list[float]
    bound_by: list[str]

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "compiler": self.compiler, "wall_ms": self.wall_ms,
                "wall_hidden_ms": self.wall_hidden_ms, "bound_by": self.bound_by}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> PinnedRow:
        return cls(data["id"], data["compiler"], data["wall_ms"], data["wall_hidden_ms"], data["bound_by"])


@dataclass
class KernelEntry:
    """One row x shape of the dashboard: its paths, inner-tiled / mmt4d (estimated cycles, executed), the peers beside
    it and the estimates of its published rows pinned to another release. ``model`` is None for an entry that only
    carries pinned rows (no cell of the toolchain under test ran it)."""

    row: str
    shape: str
    model: str | None
    core: str
    paths: dict[str, KernelPath]
    inner_over_mmt4d: tuple[float | None, float | None] = (None, None)
    peers: dict[str, PeerBeside] = field(default_factory=dict)
    pinned: dict[str, PinnedRow] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """results.json's entry (``kernels.dashboard[]``)."""
        out: dict[str, Any] = {"row": self.row, "shape": self.shape}
        if self.model is not None:
            out["model"] = self.model
        out |= {"core": self.core, "paths": {path: v.to_json() for path, v in self.paths.items()},
                "inner_over_mmt4d": {"est_cycles": self.inner_over_mmt4d[0], "executed": self.inner_over_mmt4d[1]}}
        if self.pinned:
            out["pinned"] = {key: row.to_json() for key, row in self.pinned.items()}
        if self.peers:
            out["peers"] = {name: peer.to_json() for name, peer in self.peers.items()}
        return out


def dashboard(cells: Sequence[KernelCell], perf: dict[tuple[str, str], PerfResult]) -> list[KernelEntry]:
    """One entry per row x shape, each path's facts (``KernelPath``) and inner-tiled / mmt4d, in the cells' order of
    rows and shapes (results.json's ``kernels``)."""
    est = silicon_metric(CORE)
    entries = []
    for (row, shape), paths in _index(cells, perf).items():
        base = paths.get(DEFAULT)
        facts = {}
        for path, record in paths.items():
            metrics, watched = record.metrics, record.watched
            executed = _value(record, EXECUTED_DISPATCH_INSTRUCTIONS)
            total = metrics.get(EXECUTED_DISPATCH_INSTRUCTIONS)
            traffic = record.per_call_traffic(CORE) or {}
            wall = record.wall.get(CORE)  # the estimated wall time of one call, per thread count
            facts[path] = KernelPath(
                target=record.target, est_cycles=_value(record, est), executed=executed,
                one_time_est_cycles=record.silicon_one_time.get(CORE, 0),
                one_time_executed=metrics.get(EXECUTED_ONE_TIME_INSTRUCTIONS, 0),
                iree_peak_bytes=metrics.get(IREE_PEAK_BYTES),
                vector_percent=round(100 * metrics.get(EXECUTED_DISPATCH_VECTOR, 0) / total, 1) if total else None,
                vsetvl=sum(d.get("vsetvl", 0) for d in watched.values()),
                vrgather=sum(d.get("vrgather", 0) for d in watched.values()),
                spilled_registers=record.spilled_registers() or 0,
                workgroups=max((d.get("calls", 0) for k, d in watched.items() if "matmul" in k), default=None),
                dram_bytes=traffic.get("dram_bytes"), l2_misses=traffic.get("l2_misses"),
                est_vs_default=ratio(_value(record, est), _value(base, est)),
                executed_vs_default=ratio(executed, _value(base, EXECUTED_DISPATCH_INSTRUCTIONS)),
                silicon=record.calibration,  # measured on silicon (a bundle's results): beside its estimates
                wall=PathWall({t: w["seconds"] * 1e3 for t, w in wall.items()},
                              {t: w["bound_by"] for t, w in wall.items()},
                              {t: w["latency_hidden_s"] * 1e3 for t, w in wall.items() if "latency_hidden_s" in w})
                if wall else None)
        inner, mmt4d = paths.get("inner-tiled"), paths.get("mmt4d")
        entries.append(KernelEntry(row, shape, next(iter(paths.values())).model, CORE, facts, (
            ratio(_value(inner, est), _value(mmt4d, est)),
            ratio(_value(inner, EXECUTED_DISPATCH_INSTRUCTIONS), _value(mmt4d, EXECUTED_DISPATCH_INSTRUCTIONS)))))
    order = {name: i for i, name in enumerate(dict.fromkeys(c.row for c in cells))}
    shapes = {name: i for i, name in enumerate(dict.fromkeys(c.shape.name for c in cells))}
    return sorted(entries, key=lambda e: (order.get(e.row, 0), shapes.get(e.shape, 0)))


def dashboard_table(entries: list[KernelEntry]) -> list[str]:
    """Markdown: est. X60 Mcycles per path (ratio to default), inner-tiled / mmt4d, vsetvl/vrgather per path (an
    entry that only carries pinned rows' estimates, ``with_pinned``, has no row here)."""
    entries = [e for e in entries if e.paths]
    if not entries:
        return []
    paths = [p for p in PATHS if any(p in e.paths for e in entries)]
    peers = sorted({name for e in entries for name in e.peers})
    header = ["Row", "Shape", *(f"{p} est. Mcycles per call (vs default)" for p in paths),
              *(f"peer {name} est. Mcycles per call (vs default)" for name in peers), "inner/mmt4d est.",
              "inner/mmt4d executed", *(f"{p} est. wall ms 1 / {WALL_AT} threads (bound by)" for p in paths),
              *(f"{p} vsetvl / vrgather / vregs spilled (k)" for p in paths),
              *(f"{p} DRAM KiB / L2 misses (k) per call" for p in paths)]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for e in entries:
        cells = [e.row, e.shape]
        for p in paths:
            v = e.paths.get(p)
            once = "" if v is None or not v.one_time_est_cycles else f" + {v.one_time_est_cycles / 1e6:.3f} once"
            cells.append("-" if v is None or v.est_cycles is None
                         else f"{v.est_cycles / 1e6:.3f} ({_x(v.est_vs_default)}){once}")
        for name in peers:
            peer = e.peers.get(name)
            cells.append("-" if peer is None or peer.est_cycles is None
                         else f"{peer.est_cycles / 1e6:.3f} ({_x(peer.est_vs_default)})")
        cells += [_x(e.inner_over_mmt4d[0]), _x(e.inner_over_mmt4d[1])]
        cells += [_wall(e.paths.get(p)) for p in paths]
        cells += ["-" if (v := e.paths.get(p)) is None
                  else f"{v.vsetvl / 1e3:.1f} / {v.vrgather / 1e3:.1f} / {v.spilled_registers / 1e3:.1f}"
                  for p in paths]
        cells += [_traffic(v.dram_bytes, v.l2_misses) if (v := e.paths.get(p)) else "-" for p in paths]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _traffic(dram_bytes: float | None, l2_misses: float | None) -> str:
    """DRAM KiB / thousands of L2 misses of one call, or - when not measured."""
    if dram_bytes is None or l2_misses is None:
        return "-"
    return f"{dram_bytes / 1024:.0f} / {l2_misses / 1e3:.1f}"


WALL_AT = "8"  # the dashboard's many-thread column (a K1's 8 cores)


def wall_text(ms: dict[str, float], bound_by: dict[str, str], threads: Sequence[str], mark: str = "") -> str:
    """Est. wall ms of one call at each of ``threads`` and what bounds it (one bound when all share it):
    ``12.350 / 1.655 (DRAM)``; ``mark`` after the figures."""
    figures = " / ".join("-" if t not in ms else f"{ms[t]:.3f}" for t in threads)
    bounds = " / ".join(dict.fromkeys(bound_by.get(t, "-") for t in threads))
    return f"{figures}{mark} ({bounds})"


def _wall(path: KernelPath | None) -> str:
    """Est. wall ms of one call at 1 and ``WALL_AT`` threads and what bounds it at each, or - when not measured."""
    if path is None or path.wall is None:
        return "-"
    return wall_text(path.wall.ms, path.wall.bound_by, ("1", WALL_AT))


def with_peers(entries: list[KernelEntry], rows: list[PeerRow]) -> list[KernelEntry]:
    """Each dashboard entry with its peers beside it (``peers``: name -> est. cycles on CORE, executed, vector share
    and est. / the default path's), from the peers tables' rows of this kernel (report/peers.py; a kernel peer's
    work is the same on every path's target, so any one row stands for it)."""
    ghz = CORES[CORE].ghz
    out = []
    for entry in entries:
        targets = {v.target for v in entry.paths.values()}
        default = entry.paths[DEFAULT].est_cycles if DEFAULT in entry.paths else None
        found: dict[str, PeerBeside] = {}
        for r in rows:
            if r.model != entry.model or r.target not in targets:
                continue
            est = None if r.work.est_ms is None or not ghz else r.work.est_ms * ghz * 1e6
            found[r.name] = PeerBeside(r.peer, est, r.work.per_call, r.work.vector_share, ratio(est, default))
        out.append(replace(entry, peers=dict(sorted(found.items()))) if found else entry)
    return out


def with_pinned(entries: list[KernelEntry], pinned: dict[str, PinnedRow]) -> list[KernelEntry]:
    """The dashboard's entries, each with the estimates its published rows pinned to a release made with that release
    (``pinned``: by row id, what their tests recorded) under ``pinned``; a row x shape no cell of the toolchain under
    test measured gets an entry of its own without paths (the calibration view shows it, the dashboard does not)."""
    by_key = {(e.row, e.shape): e for e in entries}
    for p in PUBLISHED:
        if p.id not in pinned:
            continue
        entry = by_key.get((p.row, p.shape))
        if entry is None:
            entry = by_key[(p.row, p.shape)] = KernelEntry(p.row, p.shape, None, CORE, {})
            entries.append(entry)
        entry.pinned[p.id] = pinned[p.id]
    return entries


@dataclass(frozen=True)
class WallRatio:
    """A published row's two sides' estimated wall time at the source's threads (ms in the ratio's order), their
    ratio against the measured range, what bounds each, the ratio with DRAM latency hidden, and the known miss's
    reason (``WALL_MISSES``) or None."""

    estimated: float
    ms: list[float | None]
    error_percent: float
    bound_by: list[str | None]
    expected_miss: str | None
    latency_hidden: float | None

    def to_json(self) -> dict[str, Any]:
        return {"wall_estimated": self.estimated, "wall_ms": self.ms, "wall_error_percent": self.error_percent,
                "bound_by": self.bound_by, "expected_miss": self.expected_miss} | (
            {} if self.latency_hidden is None else {"wall_latency_hidden": self.latency_hidden})


@dataclass(frozen=True)
class CalibrationRow:
    """A published measurement reproduced: the measured ratio and our estimates of it, with the compiler that made
    the cells (``compiler``: a pinned release's version; None for the toolchain under test). A pinned row keeps its
    wall time only: no in-core estimate, workgroups or traffic (None each)."""

    published: Published
    estimated: float | None
    workgroups: list[int | None]
    dram_bytes: list[float | None]
    l2_misses: list[float | None]
    wall: WallRatio | None
    compiler: str | None = None
    silicon: list[CalibrationPoint | None] | None = None  # each side's run on silicon (a bundle's), when any

    @property
    def error_percent(self) -> float | None:
        """The in-core estimate's error against the measured range's middle, in percent."""
        p = self.published
        return None if self.estimated is None else round(100 * (self.estimated / ((p.low + p.high) / 2) - 1), 1)

    def to_json(self) -> dict[str, Any]:
        """results.json's row (``kernels.calibration[]``)."""
        p, c = self.published, self.published.config
        out: dict[str, Any] = {
            "row": p.row, "shape": p.shape, "ratio": f"{p.over[0]} / {p.over[1]}", "measured_low": p.low,
            "measured_high": p.high, "source": p.source, "how": p.how, "toolchain": p.toolchain.label,
            "toolchain_why": p.toolchain.why,
            "configuration": {"flags": list(c.flags), "features": c.features, "threads": c.threads,
                              "operands": c.operands, "differs": list(c.differs)}}
        if self.compiler is not None:
            out["compiler"] = self.compiler
        out |= {"estimated": self.estimated, "workgroups": self.workgroups, "dram_bytes": self.dram_bytes,
                "l2_misses": self.l2_misses, "error_percent": self.error_percent}
        if self.wall is not None:
            out |= self.wall.to_json()
        if self.silicon is not None:
            out["silicon_runs"] = [None if run is None else silicon_run(run) for run in self.silicon]
        return out


def calibration(entries: list[KernelEntry]) -> list[CalibrationRow]:
    """Each published measurement reproduced: measured ratio, estimated ratio, and the error. A row of the toolchain
    under test is made of its cells (``entries``); a row pinned to another release (``RowToolchain``) of what its own
    test estimated with that release (the entry's ``pinned``), wall time only."""
    by_key = {(e.row, e.shape): e for e in entries}
    rows = []
    for p in PUBLISHED:
        entry = by_key.get((p.row, p.shape))
        if entry is None:
            continue
        if p.toolchain.release is not None:
            if (pinned := entry.pinned.get(p.id)) is not None:
                rows.append(CalibrationRow(p, None, [None, None], [None, None], [None, None],
                                           _wall_ratio(p, list(pinned.wall_ms), list(pinned.bound_by),
                                                       list(pinned.wall_hidden_ms)), compiler=pinned.compiler))
            continue
        if not entry.paths:  # only pinned rows' estimates: no cell of the toolchain under test ran
            continue
        sides = [entry.paths.get(path) for path in p.over]
        threads = str(p.config.threads)
        walls = [None if v is None else v.wall for v in sides]
        silicon = [None if v is None else v.silicon for v in sides]
        rows.append(CalibrationRow(
            p, ratio(*(None if v is None else v.est_cycles for v in sides)),
            [None if v is None else v.workgroups for v in sides], [None if v is None else v.dram_bytes for v in sides],
            [None if v is None else v.l2_misses for v in sides],
            _wall_ratio(p, [None if w is None else w.ms.get(threads) for w in walls],
                        [None if w is None else w.bound_by.get(threads) for w in walls],
                        [None if w is None else w.hidden_ms.get(threads) for w in walls]),
            silicon=silicon if any(silicon) else None))
    return rows


def _wall_ratio(p: Published, wall_ms: list[float | None], bound_by: list[str | None],
                hidden_ms: list[float | None]) -> WallRatio | None:
    """The estimated wall-time ratio of a row's two sides against its measured range, and the same with the DRAM
    latency hidden; None when a side was not estimated."""
    wall, hidden = ratio(*wall_ms), ratio(*hidden_ms)
    if wall is None:
        return None
    return WallRatio(wall, wall_ms, round(wall_ratio_error(wall, p.low, p.high), 1), bound_by, WALL_MISSES.get(p.id),
                     hidden)


def silicon_run(point: CalibrationPoint) -> dict[str, Any]:
    """A run on silicon beside its estimates, in ms: measured (the fastest run), the in-core estimate and the
    estimated wall time at the run's threads (and what bounds it, when it could be estimated), each one's error."""
    return {"core": point.core, "threads": point.threads, "measured_ms": 1e3 * point.measured_s,
            "in_core_ms": 1e3 * point.estimated_s, "in_core_error_percent": round(point.error_percent, 1)} | (
        {} if point.wall_s is None else {"wall_ms": 1e3 * point.wall_s, "bound_by": point.bound_by,
                                         "wall_error_percent": round(point.wall_error_percent or 0.0, 1)})


def silicon_run_text(point: CalibrationPoint) -> str:
    """One line: ``X60, 1 thread: measured 1.23 ms; in-core est. 0.984 ms (-20 %); est. wall 1.1 ms, bound by DRAM
    (-11 %)`` (Table 1's calibration cell)."""
    label = CORES[point.core].label if point.core in CORES else point.core
    return f"{label}, {point.threads} thread{'' if point.threads == 1 else 's'}: {_silicon_text(silicon_run(point))}"


def calibration_table(rows: list[CalibrationRow]) -> list[str]:
    if not rows:
        return []
    lines = ["| Row | Shape | Ratio | Measured on silicon | Est. wall time (X60, the source's threads) | Error | "
             "Bound by (same paths) | In-core only (llvm-mca X60, 1 thread) | Error | "
             "Matmul workgroups (same ratio's paths) | DRAM KiB / L2 misses (k) per call, X60 caches (same) | "
             "Source | Configuration (the source's; where ours differs) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    if board := any(r.silicon for r in rows):  # cells measured on silicon: a column beside the rest
        lines = [lines[0] + " On the machine that ran the bundle (same paths; its threads): measured, in-core est. "
                 "and est. wall ms (bound by), each one's error |", lines[1] + "---|"]
    for r in rows:
        p = r.published
        measured = f"{p.low:.2f}" + (f"-{p.high:.2f}" if p.high != p.low else "")
        error = "-" if r.error_percent is None else f"{r.error_percent:+.0f} %"
        wall, wall_error, bound = "-", "-", "-"
        if (w := r.wall) is not None:
            wall = f"{_x(w.estimated)} ({' / '.join(f'{ms:.3f}' for ms in w.ms if ms is not None)} ms)" + (
                f"; DRAM latency hidden {_x(w.latency_hidden)}"
                if _x(w.latency_hidden) not in ("-", _x(w.estimated)) else "")
            wall_error = f"{w.error_percent:+.0f} %" + (" (expected miss)" if w.expected_miss else "")
            bound = " / ".join(b or "-" for b in w.bound_by)
        groups = " / ".join("-" if g is None else str(g) for g in r.workgroups)
        traffic = " ; ".join(_traffic(d, m) for d, m in zip(r.dram_bytes, r.l2_misses, strict=True))
        lines.append(f"| {p.row} | {p.shape} | {p.over[0]} / {p.over[1]} | {measured} | {wall} | {wall_error} | "
                     f"{bound} | {_x(r.estimated)} | {error} | {groups} | {traffic} | {p.source}, {p.how}"
                     f"{_compiled(r)} | {_configuration(p.config)} |" + (f" {_board_runs(r)} |" if board else ""))
    return lines


def _compiled(row: CalibrationRow) -> str:
    """The compiler the row's cells were made with, and why that one."""
    toolchain = row.published.toolchain
    which = ("the toolchain under test" if toolchain.release is None else
             f"iree-base-compiler=={toolchain.release}" + (f" ({row.compiler})" if row.compiler else ""))
    return f"; compiled with {which}: {toolchain.why}"


def _board_runs(row: CalibrationRow) -> str:
    """Each path of the ratio as measured on the machine that ran a bundle, beside its estimates, or -."""
    return " ; ".join("-" if run is None else _silicon_text(silicon_run(run)) for run in row.silicon or [None, None])


def _silicon_text(run: dict[str, Any]) -> str:
    wall = "-" if "wall_ms" not in run else (f"{run['wall_ms']:.4g} ms, bound by {run['bound_by']} "
                                             f"({run['wall_error_percent']:+.0f} %)")
    return (f"measured {run['measured_ms']:.4g} ms; in-core est. {run['in_core_ms']:.4g} ms "
            f"({run['in_core_error_percent']:+.0f} %); est. wall {wall}")


def _configuration(c: Configuration) -> str:
    flags = " / ".join(f"`{f}`" for f in c.flags)
    differs = f"; ours differs: {'; '.join(c.differs)}" if c.differs else "; reproduced exactly"
    return f"{flags}; `{c.features}`; {c.threads} thread(s); operands: {c.operands}{differs}"


CALIBRATION_NOTE = (
    "Est. wall time: measure/walltime.py at the source's threads (local-task under QEMU, workgroups dealt evenly to "
    "the workers): llvm-mca's in-core cycles per thread, the runtime's measured work per workgroup and dispatch, "
    "stalls on L2 hits and DRAM misses, and DRAM and L2 bandwidth floors; error: outside the measured range, in "
    "percent (each row is a test in suites/kernels, +-30 %; an expected miss is a strict expected failure that "
    "says why). In-core only: one thread, every load an L1 hit (llvm-mca per executed block), against the range's "
    "middle. DRAM bytes and L2 misses per call: one traced run through the X60's caches as published (32 KiB L1D, "
    "512 KiB L2, 64-byte lines; LRU, no prefetcher), one core with an L2 of its own: on the board 4 cores share "
    "each L2.")


def figure(plt: Any, entries: list[KernelEntry]) -> Any:
    """Estimated cycles of every path relative to the default path, per row x shape (below 1: less)."""
    paths = [p for p in PATHS if p != DEFAULT and any(p in e.paths for e in entries)]
    labels = [f"{e.row} {e.shape}" for e in entries]
    fig, ax = plt.subplots(figsize=(max(6, len(labels) * 0.45), 4))
    width = 0.8 / max(len(paths), 1)
    for i, path in enumerate(paths):
        values = [(v.est_vs_default if (v := e.paths.get(path)) else None) or 0 for e in entries]
        ax.bar([x + i * width for x in range(len(labels))], values, width, label=path)
    ax.axhline(1.0, color="grey", linewidth=0.8)
    ax.set_yscale("log")
    ax.set_xticks([x + width * (len(paths) - 1) / 2 for x in range(len(labels))], labels, rotation=60, ha="right",
                  fontsize="x-small")
    ax.set_ylabel(f"est. {CORE} cycles / default path")
    ax.legend(fontsize="x-small")
    return fig
