"""The silicon estimator per instruction against published measurements (measure/calibration.py), formatted."""

from __future__ import annotations

import statistics
from typing import Any


def estimator_table(rows: list[dict[str, Any]]) -> list[str]:
    """Markdown: per core and instruction, measured and estimated cycles per instruction and the error."""
    if not rows:
        return []
    lines = ["| Core | Instruction | SEW | LMUL | Measured cycles/instr | Estimated (llvm-mca) | Error | Source |",
             "|---|---|---|---|---|---|---|---|"]
    for r in sorted(rows, key=lambda r: (r["core"], r["instruction"], r["sew"], r["lmul"])):
        read_as = f" (as {r['stand_in']})" if r.get("stand_in") else ""
        lines.append(f"| {r['core']} | {r['instruction']} | e{r['sew']} | {r['lmul']} | {r['measured']:.2f} | "
                     f"{r['estimated']:.2f}{read_as} | {r['error_percent']:+.1f} % | {r['source']} |")
    return lines


def estimator_summary(rows: list[dict[str, Any]]) -> str:
    """One line: how many instructions, the median and the largest error."""
    worst = max(rows, key=lambda r: abs(r["error_percent"]))
    median = statistics.median(abs(r["error_percent"]) for r in rows)
    cores = ", ".join(sorted({r["core"] for r in rows}))
    return (f"{len(rows)} instruction timings on {cores}: median |error| {median:.1f} %, largest "
            f"{worst['instruction']} e{worst['sew']}{worst['lmul']} {worst['error_percent']:+.0f} % "
            "(-v shows the table; --rvv-report=DIR puts it in results.json and the HTML page)")
