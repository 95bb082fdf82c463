"""The peers table: per model x riscv64 target, IREE beside its peer (ONNX Runtime's riscv64 build, run/peer.py).

Each row is what suites/peers/ left on its test's record (measure/peers.py ``PeerComparison.row``): executed
instructions per call on both sides, est. X60 ms per call on both sides (measure/peers.py),
vector shares, the ratio IREE / ONNX Runtime, and IREE's dispatches that make the difference. In an A/B
(``--rvv-compare`` with the toolchain comparisons run too) the peer is a fixed point: a line per cell says where IREE
moved relative to it.
"""

from __future__ import annotations

import re
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
    return "\n".join(["", "## IREE beside ONNX Runtime (peers)", "", *peers_table(rows), "", NOTE + ".",
                      *([""] + [f"- {line}" for line in moved] if moved else []), ""])


def write_peers(directory: Path, rows: list[dict[str, Any]], comparisons: list[dict[str, Any]]) -> Path | None:
    """The peers section of ``performance.md`` (after Table 1 when write_report wrote it, else on its own)."""
    if not rows:
        return None
    path = directory / "performance.md"
    head = path.read_text() if path.is_file() else "# pytest-rvv performance\n"
    atomic_write_bytes(path, (head + peers_markdown(rows, comparisons)).encode())
    return path
