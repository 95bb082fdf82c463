"""Formatters of a toolchain comparison: every model x target ranked by the work it adds, and comparison.md.

Only formats what comparison/ab.py decided (``ComparisonRecord``); comparison/summary.py collects it from the test
reports.
"""

from __future__ import annotations

from pathlib import Path

from pytest_rvv.base.store import atomic_write_bytes
from pytest_rvv.comparison.record import ComparisonRecord
from pytest_rvv.judge.gate import bytes_text, delta_text
from pytest_rvv.measure.metrics import EXECUTED_PER_CALL_INSTRUCTIONS


def ranked(records: list[ComparisonRecord]) -> list[ComparisonRecord]:
    """The comparisons, most added work first (then by model and target)."""
    return sorted(records, key=lambda r: (-r.added, r.model, r.target))


def added_by_dispatch(records: list[ComparisonRecord]) -> list[tuple[str, int]]:
    """("model on target: dispatch", instructions added) for every dispatch that executes more, most first."""
    found = [(f"{r.model} on {r.target}: {m.name}", m.after - m.before)
             for r in records for m in r.dispatches if m.after > m.before]
    return sorted(found, key=lambda item: (-item[1], item[0]))


def comparison_status(record: ComparisonRecord) -> str:
    """REGRESSED (fails), more work (within the threshold), less work, churn (code moved, work did not), same."""
    if record.regressions:
        return "REGRESSED"
    if record.added > 0:
        return "more work"
    if record.added < 0:
        return "less work"
    return "churn" if record.changed or record.unmatched or record.improvements else "same"


def comparison_lines(records: list[ComparisonRecord]) -> list[str]:
    """One line per model x target, most added work first; identical ones counted in one line."""
    lines = []
    versions = {(r.reference, r.under_test) for r in records}
    for reference, under_test in sorted(versions):
        lines += [f"reference:  {reference}", f"under test: {under_test}"]
    same = [r for r in records if comparison_status(r) == "same"]
    for record in ranked([r for r in records if comparison_status(r) != "same"]):
        work = record.work
        what = ("static" if record.counted != "executed" else
                "executed per call" if work and work.metric == EXECUTED_PER_CALL_INSTRUCTIONS else "executed")
        moved = (f"{what} {int(work.before)} -> {int(work.after)} instructions "
                 f"({delta_text(int(work.before), int(work.after))})" if work else "no work measured")
        top = "; ".join(f"{m.name} {m.before} -> {m.after} ({delta_text(m.before, m.after)})"
                        for m in record.dispatches[:2])
        counts = f"{record.changed} dispatches moved" + (f", {record.churn} churn" if record.churn else "")
        if (dram := record.dram) and dram.per_call and any(dram.per_call):
            before, after = dram.per_call
            counts += f"; DRAM per call {bytes_text(before)} -> {bytes_text(after)} ({delta_text(before, after)})"
        if record.time:
            ratio, low, high = record.time
            counts += f"; CPU time x{ratio:.2f} (pairs x{low:.2f}..x{high:.2f})"
        lines.append(f"{comparison_status(record):>9}  {record.model} on {record.target}: {moved}; {counts}"
                     + (f"; {top}" if top else ""))
        lines += [f"           {line}" for line in [*record.regressions[:3], *record.notes[:2]]]
    if same:
        lines.append(f"{len(same)} model x target with identical dispatch counts")
    return lines


def write_comparison(directory: Path, records: list[ComparisonRecord], kernel_table: list[str] = ()) -> Path:
    """``comparison.md``: the ranked lines, the kernel dashboard before/after, then every model x target's full
    comparison (asm diff included)."""
    parts = ["# pytest-rvv toolchain comparison", "", "```", *comparison_lines(records), "```"]
    if kernel_table:
        parts += ["", "## Kernels: one call, reference -> under test (most added work first)", "", *kernel_table]
    for record in ranked(records):
        if record.detail:
            parts += ["", f"## {record.model} on {record.target}: {comparison_status(record)}", "", "```",
                      record.detail, "```"]
    path = directory / "comparison.md"
    directory.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, ("\n".join(parts) + "\n").encode())
    return path
