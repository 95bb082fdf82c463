"""The peers table: per model x riscv64 target, IREE beside its peer (ONNX Runtime's riscv64 build, run/peer.py).

Each row is what suites/peers/ left on its test's record (measure/peers.py ``PeerComparison.row``): executed
instructions per call on both sides, est. X60 ms per call on both sides (measure/peers.py),
vector shares, the ratio IREE / ONNX Runtime, and IREE's dispatches that make the difference. In an A/B
(``--rvv-compare`` with the toolchain comparisons run too) the peer is a fixed point: a line per cell says where IREE
moved relative to it. ``PUBLISHED`` holds the studies' measured IREE / ONNX Runtime ratios on silicon (iree issue
24772), set beside ours with what differs (``studies``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_rvv.base.record import Record
from pytest_rvv.base.store import atomic_write_bytes

TITLE = "rvv peers: IREE beside ONNX Runtime on the same QEMU CPU (work per call)"
NOTE = ("per call: IREE's dispatch instructions of a call (the module load's left out); ONNX Runtime's every "
        "instruction two calls in one session execute less one call's (session creation left out), its framework "
        "and libc included; est. ms: llvm-mca's cycles per executed block on the modelled core at its clock, the "
        "same method on both sides (ONNX Runtime's blocks disassembled from its stripped library by address)")
HEADER = ["Model", "Target", "IREE per call (M)", "ONNX Runtime per call (M)", "IREE / ORT", "IREE est. X60 ms",
          "ORT est. X60 ms", "IREE / ORT est.", "IREE vector %", "ORT vector %", "ORT in libonnxruntime %",
          "IREE pack/unpack %", "IREE's top dispatches (share of its work)"]


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
    "threads: theirs 8 (the board's two clusters: which cores ran is not stated); ours 1 on both sides",
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
STUDIES_HEADER = ["Model", "Measured IREE / ORT (ms, on silicon)", "Ours: target (modelled X60, 1 thread)",
                  "IREE / ORT work", "IREE / ORT est. X60 ms"]


def studies(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each ``PUBLISHED`` measurement whose model ran beside its peer: the measured ratio, ours per target, and what
    differs (results.json's ``peers_published``)."""
    entries = []
    for p in PUBLISHED:
        ours = [r for r in ordered(rows) if r["model"] == p.model]
        if not ours:
            continue
        entries.append({"model": p.model, "source": p.source, "measured": p.measured, "iree_ms": p.iree_ms,
                        "onnxruntime_ms": p.peer_ms, "measured_ratio": round(p.ratio, 4),
                        "ours": [{"target": r["target"], "toolchain": r.get("toolchain"), "ratio": r["ratio"],
                                  "est_ratio": r.get("est_ratio")} for r in ours],
                        "differs": list(p.differs)})
    return entries


def _x(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def studies_table(entries: list[dict[str, Any]]) -> list[str]:
    """The studies' rows as Markdown lines: per published measurement, one line per our target beside it."""
    if not entries:
        return []
    lines = ["| " + " | ".join(STUDIES_HEADER) + " |", "|" + "---|" * len(STUDIES_HEADER)]
    for e in entries:
        measured = f"{e['measured_ratio']:.2f}x ({e['iree_ms']:g} / {e['onnxruntime_ms']:g})"
        lines += [f"| {e['model']} | {measured} | {o['target']} | {_x(o['ratio'])} | {_x(o['est_ratio'])} |"
                  for o in e["ours"]]
    return lines


def studies_lines(entries: list[dict[str, Any]]) -> list[str]:
    """Per published measurement, where and how it was measured and every way ours differs (told once)."""
    return [f"{e['model']}: {e['source']}: {e['measured']}: IREE {e['iree_ms']:g} ms, ONNX Runtime "
            f"{e['onnxruntime_ms']:g} ms. Ours differs: {'; '.join(e['differs'])}" for e in entries]


STUDIES_NOTE = ("a ratio on silicon is wall time of 8 threads on the K3; ours is one thread's executed work and its "
                "llvm-mca estimate on the X60: a ratio cancels the clock, not the core, the threads, nor the two "
                "builds' kernels")


class PeersCollector:
    """Gathers the rows the peer suite's tests left (xdist workers' reports arrive on the controller)."""

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []

    def pytest_runtest_logreport(self, report: Any) -> None:
        row = Record.of(report).peers
        if row is not None and report.when == "call":
            self.rows = [r for r in self.rows if (r["model"], r["target"]) != (row["model"], row["target"])] + [row]


def _m(n: int | None) -> str:
    return "-" if n is None else f"{n / 1e6:.2f}"


def _top(row: dict[str, Any]) -> str:
    return ", ".join(f"{d['dispatch']} {d['share_percent']:.0f} %" for d in row["iree"]["top_dispatches"])


def ordered(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(rows, key=lambda r: (r["model"], r["target"]))


def peers_table(rows: list[dict[str, Any]]) -> list[str]:
    """The table as Markdown lines (the terminal under -v, performance.md, the page)."""
    if not rows:
        return []
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    for r in ordered(rows):
        iree, ort = r["iree"], r["onnxruntime"]
        cells = [r["model"], r["target"], _m(iree["per_call_instructions"]), _m(ort["per_call_instructions"]),
                 "-" if r["ratio"] is None else f"{r['ratio']:.2f}x",
                 "-" if iree["est_ms"] is None else f"{iree['est_ms']:.2f}",
                 "-" if ort.get("est_ms") is None else f"{ort['est_ms']:.2f}",
                 "-" if r.get("est_ratio") is None else f"{r['est_ratio']:.2f}x",
                 f"{iree['vector_share_percent']:.1f}", f"{ort['vector_share_percent']:.1f}",
                 f"{ort['libonnxruntime_share_percent']:.4g}", f"{iree['pack_share_percent']:.1f}", _top(r)]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def peers_summary(rows: list[dict[str, Any]], verbose: bool) -> str:
    """One line: how many cells, the peer, and the range of IREE / ONNX Runtime."""
    ratios = [r["ratio"] for r in rows if r["ratio"] is not None]
    span = (f"IREE executes {min(ratios):.2f}x" + (f"-{max(ratios):.2f}x" if max(ratios) != min(ratios) else "")
            + " of its work per call") if ratios else "no ratio"
    cells = len({(r["model"], r["target"]) for r in rows})
    return (f"peers: {cells} model x target cell{'s' if cells != 1 else ''} beside {rows[0]['peer']}: {span}"
            + (" (the table above)" if verbose else " (-v prints the table)"))


def moved_lines(rows: list[dict[str, Any]], comparisons: list[dict[str, Any]]) -> list[str]:
    """In an A/B, the peer as a fixed point: "IREE moved from 0.42x to 0.51x of ONNX Runtime's work on M at T"."""
    peer = {(r["model"], r["target"]): r["onnxruntime"]["per_call_instructions"] for r in rows}
    lines = []
    for c in sorted(comparisons, key=lambda c: (c["model"], c["target"])):
        executed = (c.get("per_call") or {}).get("executed")
        ort = peer.get((c["model"], c["target"]))
        if executed and ort and None not in executed:
            before, now = executed[0] / ort, executed[1] / ort
            digits = 2 if f"{before:.2f}" != f"{now:.2f}" else 4  # a move too small for two decimals still shows
            lines.append(f"IREE moved from {before:.{digits}f}x to {now:.{digits}f}x of ONNX Runtime's work on "
                         f"{c['model']} at {c['target']} ({_release(c['reference'])} -> {_release(c['under_test'])})")
    return lines


def _release(version: str) -> str:
    """``IREE compiler version 3.12.0rc20260917 @ 2b05c5...`` -> ``3.12.0rc20260917``."""
    match = re.search(r"IREE compiler version (\S+)", version)
    return match.group(1) if match else version


def peers_markdown(rows: list[dict[str, Any]], comparisons: list[dict[str, Any]]) -> str:
    """performance.md's section."""
    if not rows:
        return ""
    moved = moved_lines(rows, comparisons)
    entries = studies(rows)
    published = [*studies_table(entries), "", STUDIES_NOTE + ".", "", *(f"- {line}" for line in studies_lines(entries))]
    return "\n".join(["", "## IREE beside ONNX Runtime (peers)", "", *peers_table(rows), "", NOTE + ".",
                      *([""] + [f"- {line}" for line in moved] if moved else []),
                      *(["", "### Beside the studies (measured on silicon)", "", *published] if entries else []),
                      ""])


def write_peers(directory: Path, rows: list[dict[str, Any]], comparisons: list[dict[str, Any]]) -> Path | None:
    """The peers section of ``performance.md`` (after Table 1 when write_report wrote it, else on its own)."""
    if not rows:
        return None
    path = directory / "performance.md"
    head = path.read_text() if path.is_file() else "# pytest-rvv performance\n"
    atomic_write_bytes(path, (head + peers_markdown(rows, comparisons)).encode())
    return path
