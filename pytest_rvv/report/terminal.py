"""The terminal summary of a run, from its sections (report/sections.py): a passing run fits one screen.

By default (and with ``-q``) each section is one line (how many cells, the largest error, what changed), then
what regressed, the expected failures one line per cause, and where the full report is. ``-v`` adds every table
(the agreement grid, Table 1, the microkernel path table, the kernel dashboard, each cell's vector share, every
baseline file written); ``--rvv-report=DIR`` writes them all. A failing test's details are pytest's, as ever.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pytest_rvv.judge.peers import gaps
from pytest_rvv.judge.policy import REGRESSED
from pytest_rvv.judge.recorder import UNCHANGED
from pytest_rvv.report.agreement import agreement_grid, agreement_line
from pytest_rvv.report.estimator import estimator_summary, estimator_table
from pytest_rvv.report.peers import (
    GAP_TITLE,
    STUDIES_TITLE,
    THREADS_TITLE,
    gap_table,
    moved_lines,
    peers_summary,
    peers_table,
    studies,
    studies_lines,
    studies_table,
    threads_table,
)
from pytest_rvv.report.peers import TITLE as PEERS_TITLE
from pytest_rvv.report.performance import kernel_lines, microkernel_table, table_one, table_one_note
from pytest_rvv.report.sections import Sections, Written
from pytest_rvv.report.vectorization import cell_lines, review_lines, unused_lines

Block = tuple[str | None, list[str]]  # a section's title ("----- title -----"; None: no title line) and its lines
SUMMARY = "rvv summary"
IMPROVEMENTS = "rvv improvements (passing; --rvv-strict-baselines fails on them)"
CHANGED_SHOWN = 10  # vectorization results with a change, shown by default (-v shows every one)


def terminal_blocks(sections: Sections, verbose: bool, written: Written | None = None,
                    expected: Iterable[ExpectedFailureSeen] = ()) -> list[Block]:
    """What the terminal prints: with ``verbose`` the tables first, then always the summary; ``expected``: the run's
    expected failures, to be told one line per cause (none when pytest's ``-rx`` lists each)."""
    blocks = tables(sections) if verbose else []
    blocks.append((SUMMARY, summary_lines(sections, verbose, written, expected_failure_lines(expected))))
    if sections.improvements:
        blocks.append((IMPROVEMENTS, sorted(sections.improvements)))
    if review := review_lines(sections.vectorization):
        blocks.append(("rvv upgrade review", review))
    return [(title, lines) for title, lines in blocks if lines]


def tables(s: Sections) -> list[Block]:
    """Every table of the run (-v): the same sections --rvv-report writes."""
    blocks: list[Block] = []
    if s.agreement:
        blocks.append(("rvv agreement with onnxruntime (max abs error)", agreement_grid(s.agreement)))
    if s.estimator:
        blocks.append(("rvv estimator vs silicon, per instruction", estimator_table(s.estimator)))
    if s.performance:
        blocks.append(("rvv performance (Table 1)", [*table_one(s.performance), *table_one_note(s.performance)]))
        blocks.append(("rvv default path vs data-tiled microkernel path", microkernel_table(s.performance, s.pairs)))
    if s.kernels:
        blocks.append(("rvv kernel dashboard", kernel_lines(s.kernels)))
    if s.peers:
        blocks.append((GAP_TITLE, gap_table(gaps(s.peers))))
        blocks.append((PEERS_TITLE, peers_table(s.peers)))
        if threaded := threads_table(s.peers):
            blocks.append((THREADS_TITLE, threaded))
        published = studies(s.peers)
        blocks.append((STUDIES_TITLE, [*studies_table(published), *studies_lines(published)]))
    blocks.append(("rvv vectorization", cell_lines(s.vectorization)))
    return blocks


def summary_lines(s: Sections, verbose: bool, written: Written | None, expected: list[str]) -> list[str]:
    """One line per section, what changed or regressed, the expected failures, and where the report is."""
    lines = []
    if s.agreement:
        lines.append(agreement_line(s.agreement))
    if s.vectorization:
        lines += vectorization_lines(s, verbose)
    lines += unused_lines(s.unused_snapshots)
    if s.performance:
        micro = " and the microkernel path table" if microkernel_table(s.performance, s.pairs) else ""
        where = "above" if verbose else "-v prints it"
        lines.append(f"performance: {_cells(s.performance)} measured (Table 1{micro}: {where})")
    lines += regressed_lines(s.verdicts)
    if s.kernels:
        lines.append(f"kernel dashboard: {len(s.kernels)} rows x shapes on {s.kernel_cells} cells"
                     + ("" if verbose else " (-v prints every path side by side)"))
    if s.estimator:
        lines.append(estimator_summary(s.estimator))
    if s.peers:
        lines += [peers_summary(s.peers, verbose), *moved_lines(s.peers, s.comparisons)]
    lines += note_lines(s.notes)
    lines += baseline_lines(s.baselines, verbose)
    lines += expected
    ran = bool(s.tests) or written is not None  # a pytest-rvv cell ran: say where its report is
    return lines + (report_lines(written, verbose) if ran else [])


def vectorization_lines(s: Sections, verbose: bool) -> list[str]:
    """How many results were checked against their snapshots; by default the changed ones (-v: every one above)."""
    kinds = [kind for _, _, kind in s.vectorization]
    counted = ", ".join(f"{kinds.count(k)} {k}" for k in dict.fromkeys(sorted(kinds)))
    changed = {key: r for key, r in s.vectorization.items() if r.changed}
    head = (f"vectorization: {len(s.vectorization)} results ({counted}) of {_cells(s.vectorization)}: "
            + (f"{len(changed)} changed" + (" (above)" if verbose else "") if changed else "nothing changed"))
    if verbose or not changed:
        return [head]
    shown = dict(sorted(changed.items())[:CHANGED_SHOWN])
    more = [f"  ... and {len(changed) - len(shown)} more (-v lists every result)"] if len(changed) > len(shown) else []
    return [head + ":", *cell_lines(shown, changed_only=True), *more]


def regressed_lines(verdicts: dict[tuple[str, str], list[Any]]) -> list[str]:
    """Each regressed metric of a cell: baseline -> now (the failing test's details hold its whole table)."""
    return [f"{REGRESSED} {model} on {target}: {metric} {_number(baseline)} -> {_number(now)}"
            for (model, target), rows in sorted(verdicts.items())
            for metric, baseline, now, status in rows if status == REGRESSED]


def note_lines(notes: dict[str, list[str]]) -> list[str]:
    """The same note on many tests once, with their count."""
    return [(generic if len(lines) > 1 else lines[0]) + (f" [{len(lines)} tests]" if len(lines) > 1 else "")
            for generic, lines in notes.items()]


def baseline_lines(written: list[str], verbose: bool) -> list[str]:
    """What the recorder wrote, a line per file; files left unchanged are counted unless ``verbose``."""
    if verbose:
        return list(written)
    unchanged = [line for line in written if line.startswith(UNCHANGED)]
    counted = [f"{len(unchanged)} baseline files unchanged (-v lists them)"] if unchanged else []
    return [line for line in written if not line.startswith(UNCHANGED)] + counted


def report_lines(written: Written | None, verbose: bool) -> list[str]:
    """Where the full report is: what --rvv-report wrote, or how to have it."""
    if written is None:
        return ["report: -v prints every table; --rvv-report=DIR writes the whole run (index.html, results.json, "
                "Table 1, plots)"]
    lines = [f"report: {path}" for path in written.files] if verbose else []
    if written.page is not None:
        size, seconds = written.page
        lines.append(f"report: {written.directory / 'index.html'} and results.json ({size / 1024:.0f} KiB, "
                     f"written in {seconds:.1f} s)")
    if written.files and not verbose:
        names = [p.name for p in written.files]
        plots = sum(name.endswith(".png") for name in names)
        listed = ", ".join(name for name in names if not name.endswith(".png"))
        lines.append(f"report: {written.directory}: {listed}" + (f" and {plots} plots" if plots else ""))
    return lines


@dataclass(frozen=True)
class ExpectedFailureSeen:
    """An expected failure of the run: its reason, what failed (the test's parameters without the target: a model,
    an ONNX node test) and the target it failed on (None when the test has none)."""

    reason: str
    subject: str
    target: str | None = None

    @property
    def cause(self) -> tuple[str, str]:
        """What failed and how (the reason up to its first colon, the target's name taken out): the same on every
        target, whatever target-specific detail the rest of the message carries."""
        return self.subject, self.generic.partition(": ")[0]

    @property
    def generic(self) -> str:
        """The reason with the target's name as ``<target>``."""
        if self.target is None:
            return self.reason
        return re.sub(rf"(?<![\w.-]){re.escape(self.target)}(?![\w.-])", "<target>", self.reason)


def expected_failure_lines(failures: Iterable[ExpectedFailureSeen]) -> list[str]:
    """The run's expected failures, one line per cause with how many tests it stands for (as pytest's ``-rs``
    groups skips, and like its lines not cut to the terminal's width); a cause seen on several targets is told
    once, its targets named at the end."""
    causes: dict[tuple[str, str], list[ExpectedFailureSeen]] = {}
    for failure in failures:
        causes.setdefault(failure.cause, []).append(failure)
    lines = []
    for _, seen in sorted(causes.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        targets = sorted({f.target for f in seen if f.target is not None})
        text = f"{shared_text([f.generic for f in seen])} (<target>: {', '.join(targets)})" if len(targets) > 1 \
            else seen[0].reason
        lines.append(f"XFAIL [{len(seen)}] {text}")
    return lines


def shared_text(texts: list[str]) -> str:
    """What ``texts`` say alike: the whole text when they are the same, else their common start and end with ``…``
    where they differ (cut at word boundaries), so no one target's detail is told as every target's."""
    if len(set(texts)) == 1:
        return texts[0]
    start = re.sub(r"[\w.,=+-]*$", "", _common_start(texts))
    end = re.sub(r"^[\w.,=+-]*", "", _common_start([t[::-1] for t in texts])[::-1])
    end = end[max(0, len(start) + len(end) - min(map(len, texts))):]  # the two never overlap
    return f"{start}…{end}"


def _common_start(texts: list[str]) -> str:
    """The characters every text starts with."""
    shortest = min(texts, key=len)
    for i, char in enumerate(shortest):
        if any(t[i] != char for t in texts):
            return shortest[:i]
    return shortest


def _cells(keyed: dict[Any, Any]) -> str:
    count = len({(key[0], key[1]) for key in keyed})
    return f"{count} model x target cell{'s' if count != 1 else ''}"


def _number(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.4g}" if isinstance(value, float) and not float(value).is_integer() else f"{int(value)}"
