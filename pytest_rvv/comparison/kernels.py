"""The kernel dashboard before and after (``--rvv-compare`` over suites/kernels): per row x shape x path, the work
of one call with the reference and with the toolchain under test, the path's ratio to the default path on both, and
the comparison's verdict, most added work first.

Only arranges what comparison/ab.py decided and measured (each comparison's ``per_call``, recorded on its report).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from pytest_rvv.comparison.report import comparison_status
from pytest_rvv.config.kernels import CORE, KernelCell
from pytest_rvv.config.paths import DEFAULT, PATHS
from pytest_rvv.measure.metrics import ratio


def _added(before: float | None, after: float | None) -> float | None:
    """Added work in percent; None without both sides' figures, infinite for work from nothing."""
    if before is None or after is None:
        return None
    return round(100 * (after - before) / before, 2) if before else (math.inf if after else 0.0)


def kernel_changes(cells: Sequence[KernelCell], records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One entry per compared kernel cell: executed instructions and estimated cycles of one call (reference, under
    test), the path / default ratio on each side, the added work (per call, executed) and the verdict; ranked. The
    modelled DRAM bytes of one call on the core's caches (``dram_bytes``, reference and under test) where both sides'
    traffic was traced."""
    by_cell = {(r["model"], r["target"]): r for r in records}
    entries = []
    for cell in cells:
        record = by_cell.get((cell.model.name, cell.target.name))
        if record is None:
            continue
        per_call = record.get("per_call") or {}  # none: one side could not compile or run it (the notes say)
        executed = per_call.get("executed") or [None, None]
        cycles = per_call.get("cycles", {}).get(CORE) or [None, None]
        entries.append({"row": cell.row, "shape": cell.shape.name, "path": cell.path, "target": cell.target.name,
                        "model": cell.model.name, "status": comparison_status(record), "executed": executed,
                        "est_cycles": cycles, "core": CORE, "added_percent": _added(*executed),
                        "notes": record.get("notes", [])[:1]}
                       | ({"dram_bytes": per_call["dram_bytes"]} if per_call.get("dram_bytes") else {}))
    defaults = {(e["row"], e["shape"]): e for e in entries if e["path"] == DEFAULT}
    for e in entries:
        base = defaults.get((e["row"], e["shape"]))
        e["vs_default"] = [None, None] if base is None else [ratio(e["est_cycles"][i], base["est_cycles"][i])
                                                              for i in (0, 1)]
    order = {name: i for i, name in enumerate(PATHS)}
    return sorted(entries, key=lambda e: (e["added_percent"] is None, -(e["added_percent"] or 0), e["row"], e["shape"],
                                          order.get(e["path"], 0)))


def _pair(values: list[float | None], scale: float, digits: int) -> str:
    if None in values:
        return "-"
    before, after = values
    change = f" ({100 * (after - before) / before:+.1f} %)" if before else ""
    return f"{before / scale:.{digits}f} -> {after / scale:.{digits}f}{change}"


def kernel_changes_table(entries: list[dict[str, Any]]) -> list[str]:
    """Markdown, most added work per call first: the verdict, executed k instructions and est. Mcycles per call,
    reference -> under test, the path / default ratio on both sides, and the modelled DRAM KiB per call."""
    if not entries:
        return []
    lines = ["| Verdict | Row | Shape | Path | Executed per call (k), reference -> under test | "
             f"Est. {CORE} Mcycles per call | Path / default est., reference -> under test | "
             f"DRAM KiB per call ({CORE} caches) |",
             "|---|---|---|---|---|---|---|---|"]
    for e in entries:
        ratio = e["vs_default"]
        ratios = "-" if None in ratio else f"{ratio[0]:.2f}x -> {ratio[1]:.2f}x"
        executed = _pair(e["executed"], 1e3, 1) if None not in e["executed"] else "; ".join(e["notes"]) or "-"
        lines.append(f"| {e['status']} | {e['row']} | {e['shape']} | {e['path']} | {executed} | "
                     f"{_pair(e['est_cycles'], 1e6, 3)} | {ratios} | {_pair(e.get('dram_bytes', [None]), 1024, 1)} |")
    return lines
