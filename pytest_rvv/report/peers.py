"""The peers tables: per model (or kernel) x riscv64 target, IREE beside a peer (run/peer.py PEERS: ONNX Runtime's
riscv64 build on the models, OpenBLAS on the kernel suite's f32 matmuls).

Each row is what a peer test left on its record (measure/peers.py ``PeerComparison.row``), read once into a
``PeerRow`` (its sides ``IreeCall`` and ``PeerCall``, at a board's threads ``ThreadsRow``): executed instructions per
call on both sides, est. X60 ms per call on both sides (measure/peers.py), vector shares, the ratio IREE / peer, and
IREE's dispatches that make the difference. The gap table leads: per model, IREE's best path (its fastest target by
est. X60 ms) beside the fastest peer. In an A/B (``--rvv-compare`` with the toolchain comparisons run too) each peer is
a fixed point: a line per cell says where IREE moved relative to it. ``PUBLISHED`` holds the studies' measured IREE /
ONNX Runtime ratios on silicon (iree issue 24772), set beside ours with what differs (``studies``).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_rvv.base.record import Record
from pytest_rvv.base.store import atomic_write_bytes
from pytest_rvv.comparison.record import ComparisonRecord
from pytest_rvv.judge.peers import NEAR, PeerGap, gaps, peer_standing
from pytest_rvv.measure.peers import PeerRow, WallRow, ordered
from pytest_rvv.run.peer import ONNXRUNTIME

TITLE = "rvv peers: IREE beside its peers on the same QEMU CPU (work per call)"
NOTE = ("per call: IREE's dispatch instructions of a call (the module load's left out); a peer's every instruction "
        "two calls in one process execute less one call's (loading and session creation left out), its framework "
        "and libc included; est. ms: llvm-mca's cycles per executed block on the modelled core at its clock, the "
        "same method on both sides (a peer's blocks disassembled from its stripped library by address)")
HEADER = ["Model", "Target", "Peer", "IREE per call (M)", "Peer per call (M)", "IREE / peer", "IREE est. X60 ms",
          "Peer est. X60 ms", "IREE / peer est.", "IREE vector %", "Peer vector %", "Peer in its library %",
          "IREE pack/unpack %", "IREE's top dispatches (share of its work)"]
GAP_TITLE = "rvv peers: the gap, per model: IREE's best path beside the fastest peer (est. X60 ms per call)"
THREADS_TITLE = "rvv peers at a board's threads: the busiest thread, est. X60 ms per call"
THREADS_HEADER = ["Model", "Target", "Peer", "Threads", "IREE est. X60 ms", "Peer est. X60 ms", "IREE / peer est.",
                  "Est. wall ms, 1 thread: IREE / peer (bound by)", "Est. wall ms, N threads: IREE / peer (bound by)",
                  "IREE / peer wall, N", "Peer DRAM per call (KiB)",
                  "Peer's work per thread (k: main, then workers)", "Peer balance", "Peer waiting left out (M)"]
THREADS_NOTE = ("at N threads: IREE, each dispatch's workgroups dealt evenly to the workers (their llvm-mca cycles "
                "and the runtime's measured work per workgroup, measure/threads.py), as a board's workers woken "
                "together take them; the peer, its busiest thread's share of one call "
                "(blocks whose executions differ between two runs of the same content are waiting, left out: "
                "measure/peer_threads.py); both in-core. Est. wall: measure/walltime.py's model on both sides, the "
                "in-core cycles of each thread plus stalls on L2 hits and DRAM misses and the bandwidth floors, the "
                "traffic of one call traced on one thread through the X60's modelled caches (the peer's: a run that "
                "makes one call less one that makes none); the peer's call is one region, each thread's share of the "
                "traffic its share of the cycles; the waits between threads left out; "
                "balance: the busiest thread over an even split")
GAP_HEADER = ["Model", "IREE's best path", "IREE est. X60 ms", "IREE per call (M)", "Fastest peer",
              "Peer est. X60 ms", "Peer per call (M)", "IREE / fastest peer"]


@dataclass(frozen=True)
class PublishedPeer:
    """A study's measured IREE / peer wall time on a board, quoted from its source, and every way our rows (modelled
    core, QEMU, one thread) are not that measurement."""

    model: str  # our zoo model that stands for theirs
    iree_ms: float
    peer_ms: float
    source: str
    measured: str  # board, cores, threads, what was timed
    differs: tuple[str, ...]
    threads: int = 8  # the threads it ran (our est. wall ratio is read at as many, where --rvv-wall-time measured it)

    @property
    def ratio(self) -> float:
        return self.iree_ms / self.peer_ms


ISSUE_24772 = "https://github.com/iree-org/iree/issues/24772"
# iree issue 24772 ("[RISC-V] Benchmarking IREE vs ExecuTorch / ONNX Runtime / LiteRT", dimp-pl, 2026-07-30),
# quoted: "Board spec: SpacemiT K3, 8x X100 @ 2.2 GHz (VLEN-256) + 8x A100 @ 1.8 GHz (VLEN-1024), kernel
# `6.18.3-1.0.5.4`"; "`performance` governor was pinned on both X100 and A100 clusters"; models: "ResNet18 |
# torchvision `ResNet18_Weights.IMAGENET1K_V1` | dense conv". fp32 table (ms/inference): "| resnet18 | **117.0** |
# 138.0 | 418.0 | — |" (IREE | ExecuTorch | ONNX Runtime | LiteRT). int8 table, "8 threads (ms/inference, lower is
# better)": "| resnet18 | 83.9 | **17.4** | 406.1 | 70.3 |". A maintainer's comment there: "you are either enabling
# all ukernels or enabling none. For RISC-V, pack and unpack ukernels don't exist so they fall back to scalar code".
# The issue's text does not say which ONNX Runtime build or execution provider ran, nor IREE's version and flags.
ISSUE_24772_MEASURED = ("SpacemiT K3 (8x X100 @ 2.2 GHz VLEN 256 + 8x A100 @ 1.8 GHz VLEN 1024), 8 threads, "
                        "wall ms per inference")
_DIFFERS_24772 = (
    "core: theirs the K3's X100 on silicon (caches, memory, branch prediction); ours the X60 modelled by llvm-mca "
    "at 1.6 GHz, every load an L1 hit, under QEMU at the target's VLEN (256 on zvl256b)",
    "threads: theirs 8 (the board's two clusters: which cores ran is not stated); ours 1 on both sides for the work "
    "and the in-core estimate, and 8 for the est. wall time (--rvv-wall-time=x60:1,8: IREE's local-task workers "
    "beside ONNX Runtime's intra-op pool, both modelled on the X60's caches and memory)",
    "ONNX Runtime: their build and execution provider not stated in the issue; ours Debian 13's 1.21.0 "
    "(rv64gc build, CPU execution provider), which executes no RVV instruction (measured: vector share 0)",
    "IREE: their version and flags not stated (a maintainer there: all ukernels or none); ours the run's "
    "toolchain with the target's flags (zvl256b: no data tiling; -mmt4d: data tiling on the mmt4d ukernel only)",
    "model: theirs torchvision's ResNet18 with IMAGENET1K_V1 weights (input not stated); ours the same layout, BN "
    "folded into the convs, seeded weights, one 1x3x224x224 input",
)
PUBLISHED = (
    PublishedPeer("resnet18", 117.0, 418.0, f"iree issue 24772 ({ISSUE_24772}), fp32 table", ISSUE_24772_MEASURED,
                  _DIFFERS_24772),
    PublishedPeer("resnet18-int8", 83.9, 406.1, f"iree issue 24772 ({ISSUE_24772}), int8 table",
                  ISSUE_24772_MEASURED,
                  (*_DIFFERS_24772, "int8: their quantization not stated; ours static QDQ by onnxruntime "
                                    "(per-channel int8 weights, int8 activations, 8 seeded calibration inputs)")),
)
STUDIES_TITLE = "rvv peers beside the studies: a measured IREE / ONNX Runtime on silicon beside ours"
STUDIES_HEADER = ["Model", "Measured IREE / ORT (ms, on silicon)", "Ours: target (modelled X60)",
                  "IREE / ORT work, 1 thread", "IREE / ORT est. X60 ms, 1 thread",
                  "IREE / ORT est. X60 wall ms at the study's threads"]


@dataclass(frozen=True)
class StudyTarget:
    """Ours beside a published measurement, on one target: IREE / ONNX Runtime by work and est. ms on one thread, and
    by est. wall time at the study's threads (where --rvv-wall-time measured them)."""

    target: str
    toolchain: str | None
    ratio: float | None
    est_ratio: float | None
    threads: int
    wall_ratio: float | None


@dataclass(frozen=True)
class Study:
    """A ``PUBLISHED`` measurement whose model ran beside its peer, with ours per target (results.json's
    ``peers_published``, ``to_json``)."""

    published: PublishedPeer
    ours: tuple[StudyTarget, ...]

    def to_json(self) -> dict[str, Any]:
        p = self.published
        return {"model": p.model, "source": p.source, "measured": p.measured, "iree_ms": p.iree_ms,
                "onnxruntime_ms": p.peer_ms, "measured_ratio": round(p.ratio, 4),
                "ours": [dataclasses.asdict(o) for o in self.ours], "differs": list(p.differs)}


def studies(rows: list[PeerRow]) -> list[Study]:
    """Each ``PUBLISHED`` measurement whose model ran beside its peer: the measured ratio, ours per target, and what
    differs."""
    entries = []
    for p in PUBLISHED:
        ours = [r for r in ordered(rows) if r.model == p.model and r.name == ONNXRUNTIME]
        if ours:
            entries.append(Study(p, tuple(StudyTarget(r.target, r.toolchain, r.ratio, r.est_ratio, p.threads,
                                                      _wall_ratio(r, p.threads)) for r in ours)))
    return entries


def _wall_ratio(row: PeerRow, threads: int) -> float | None:
    """IREE's est. wall ms / the peer's at ``threads`` threads in a peer row (measured on --rvv-wall-time), or None."""
    wall = row.threads.wall(threads) if row.threads is not None else None
    return None if wall is None else wall.ratio


def _x(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def studies_table(entries: list[Study]) -> list[str]:
    """The studies' rows as Markdown lines: per published measurement, one line per our target beside it."""
    if not entries:
        return []
    lines = ["| " + " | ".join(STUDIES_HEADER) + " |", "|" + "---|" * len(STUDIES_HEADER)]
    for e in entries:
        p = e.published
        measured = f"{p.ratio:.2f}x ({p.iree_ms:g} / {p.peer_ms:g})"
        lines += [f"| {p.model} | {measured} | {o.target} | {_x(o.ratio)} | {_x(o.est_ratio)} | "
                  + ("-" if o.wall_ratio is None else f"{_x(o.wall_ratio)} ({o.threads} threads)")
                  + " |" for o in e.ours]
    return lines


def studies_lines(entries: list[Study]) -> list[str]:
    """Per published measurement, where and how it was measured and every way ours differs (told once)."""
    return [f"{p.model}: {p.source}: {p.measured}: IREE {p.iree_ms:g} ms, ONNX Runtime {p.peer_ms:g} ms. Ours "
            f"differs: {'; '.join(p.differs)}" for p in (e.published for e in entries)]


STUDIES_NOTE = ("a ratio on silicon is wall time of 8 threads on the K3; ours is one thread's executed work and its "
                "llvm-mca estimate on the X60, and, where --rvv-wall-time measured 8 threads, both sides' est. wall "
                "time at 8 (the X60's caches and memory modelled): a ratio cancels the clock, not the core, nor the "
                "two builds' kernels")


class PeersCollector:
    """Gathers the rows the peer suite's tests left (xdist workers' reports arrive on the controller)."""

    def __init__(self) -> None:
        self.rows: list[PeerRow] = []

    def pytest_runtest_logreport(self, report: Any) -> None:
        recorded = Record.of(report).peers
        if recorded is not None and report.when == "call":
            row = PeerRow.from_json(recorded)
            self.rows = [r for r in self.rows if r.key != row.key] + [row]


def _m(n: int | None) -> str:
    return "-" if n is None else f"{n / 1e6:.2f}"


def _top(row: PeerRow) -> str:
    return ", ".join(f"{dispatch} {share:.0f} %" for dispatch, share in row.iree.top)


def peers_table(rows: list[PeerRow]) -> list[str]:
    """The table as Markdown lines (the terminal under -v, performance.md, the page)."""
    if not rows:
        return []
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    for r in ordered(rows):
        iree, peer = r.iree, r.work
        cells = [r.model, r.target, r.name, _m(iree.per_call), _m(peer.per_call),
                 "-" if r.ratio is None else f"{r.ratio:.2f}x", "-" if iree.est_ms is None else f"{iree.est_ms:.2f}",
                 "-" if peer.est_ms is None else f"{peer.est_ms:.2f}", _x(r.est_ratio),
                 f"{iree.vector_share:.1f}", f"{peer.vector_share:.1f}",
                 "-" if peer.library_share is None else f"{peer.library_share:.4g}", f"{iree.pack_share:.1f}",
                 _top(r)]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def threads_table(rows: list[PeerRow]) -> list[str]:
    """Each row measured at a board's threads, as Markdown lines."""
    threaded = [r for r in ordered(rows) if r.threads is not None]
    if not threaded:
        return []
    lines = ["| " + " | ".join(THREADS_HEADER) + " |", "|" + "---|" * len(THREADS_HEADER)]
    for r in threaded:
        t = r.threads
        assert t is not None
        split = " / ".join(f"{n / 1e3:.0f}" for n in t.per_thread)
        at_n = t.wall(t.threads)
        dram = t.peer_dram_bytes
        lines.append(f"| {r.model} | {r.target} | {r.name} | {t.threads} | {_ms(t.iree_est_ms)} | "
                     f"{_ms(t.peer_est_ms)} | {_x(t.est_ratio)} | {_wall(t.wall(1))} | {_wall(at_n)} | "
                     f"{_x(at_n.ratio) if at_n else '-'} | {'-' if dram is None else f'{dram / 1024:.0f}'} | "
                     f"{split} | {t.balance:.2f} | {_m(t.waited)} |")
    return lines


def _wall(wall: WallRow | None) -> str:
    """``IREE / peer (bound / bound)`` ms of one est. wall time beside, or ``-``."""
    if wall is None:
        return "-"
    return f"{_ms(wall.iree_ms)} / {_ms(wall.peer_ms)} ({wall.iree_bound or '-'} / {wall.peer_bound})"


def gap_table(entries: list[PeerGap]) -> list[str]:
    """The gap table (judge/peers.py ``gaps``) as Markdown lines."""
    if not entries:
        return []
    lines = ["| " + " | ".join(GAP_HEADER) + " |", "|" + "---|" * len(GAP_HEADER)]
    for e in entries:
        ratio = _x(e.est_ratio) if e.est_ratio is not None else f"{_x(e.work_ratio)} (work)"
        lines.append(f"| {e.model} | {e.iree_target} | {_ms(e.iree_est_ms)} | {_m(e.iree_per_call_instructions)} | "
                     f"{e.peer_title} ({e.peer_target}) | {_ms(e.peer_est_ms)} | "
                     f"{_m(e.peer_per_call_instructions)} | {ratio} |")
    return lines


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}"


def peers_summary(rows: list[PeerRow], verbose: bool) -> str:
    """One line: how many cells beside which peers, on how many models IREE's best path is within NEAR of the fastest
    peer, and the model furthest behind (or, when IREE leads everywhere, the closest)."""
    cells = len({(r.model, r.target) for r in rows})
    names = ", ".join(sorted({r.peer.split(" (")[0] for r in rows}))
    standing = peer_standing(gaps(rows))
    if standing is not None:
        far = standing.entry
        which = "furthest behind" if standing.behind else "IREE ahead on every one; closest"
        span = (f"IREE's best path within {NEAR:g}x of the fastest peer on {standing.near} of {standing.models} model"
                f"{'s' if standing.models != 1 else ''}; {which}: {far.model} on {far.iree_target}, "
                f"{standing.ratio:.2f}x {far.peer_title}"
                + (" (est. X60 ms)" if standing.by_estimate else " (work per call)"))
    else:
        span = "no ratio"
    return (f"peers: {cells} model x target cell{'s' if cells != 1 else ''} beside {names}: {span}"
            + (" (the tables above)" if verbose else " (-v prints the tables)"))


def moved_lines(rows: list[PeerRow], comparisons: list[ComparisonRecord]) -> list[str]:
    """In an A/B, each peer as a fixed point: "IREE moved from 0.42x to 0.51x of ONNX Runtime's work on M at T"."""
    lines = []
    for c in sorted(comparisons, key=lambda c: c.key):
        executed = c.per_call.executed if c.per_call is not None else None
        for r in ordered([r for r in rows if (r.model, r.target) == c.key]):
            work = r.work.per_call
            if executed and work:
                before, now = executed[0] / work, executed[1] / work
                digits = 2 if f"{before:.2f}" != f"{now:.2f}" else 4  # a move too small for two decimals still shows
                lines.append(f"IREE moved from {before:.{digits}f}x to {now:.{digits}f}x of {r.title}'s work on "
                             f"{c.model} at {c.target} ({_release(c.reference)} -> {_release(c.under_test)})")
    return lines


def _release(version: str) -> str:
    """``IREE compiler version 3.12.0rc20260917 @ 2b05c5...`` -> ``3.12.0rc20260917``."""
    match = re.search(r"IREE compiler version (\S+)", version)
    return match.group(1) if match else version


def peers_markdown(rows: list[PeerRow], comparisons: list[ComparisonRecord]) -> str:
    """performance.md's section."""
    if not rows:
        return ""
    moved = moved_lines(rows, comparisons)
    threads = threads_table(rows)
    entries = studies(rows)
    published = [*studies_table(entries), "", STUDIES_NOTE + ".", "", *(f"- {line}" for line in studies_lines(entries))]
    return "\n".join(["", "## IREE beside its peers", "", "### The gap: IREE's best path beside the fastest peer", "",
                      *gap_table(gaps(rows)), "", "### Every cell", "", *peers_table(rows), "", NOTE + ".",
                      *(["", "### At a board's threads", "", *threads, "", THREADS_NOTE + "."] if threads else []),
                      *([""] + [f"- {line}" for line in moved] if moved else []),
                      *(["", "### Beside the studies (measured on silicon)", "", *published] if entries else []),
                      ""])


def write_peers(directory: Path, rows: list[PeerRow], comparisons: list[ComparisonRecord],
                after: Sequence[Path] = ()) -> Path | None:
    """The peers section of ``performance.md``: after Table 1 when this run's write_report wrote that file (among
    ``after``), else on its own (a file an earlier run left in ``directory`` is replaced, not appended to)."""
    if not rows:
        return None
    path = directory / "performance.md"
    head = path.read_text() if path in after else "# pytest-rvv performance\n"
    atomic_write_bytes(path, (head + peers_markdown(rows, comparisons)).encode())
    return path
