"""The performance verdict of one model x target: measurement + the baselines that apply -> rows.

The one place that decides: portable metrics against the committed baseline (every machine),
machine-bound metrics against this machine's baseline (or shown as information), diagnostics
shown as changes. The fixture only fails or passes on what this returns; reports only format it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from pytest_rvv.config.cores import cache_hierarchy
from pytest_rvv.config.machine import Machine
from pytest_rvv.config.targets import Target
from pytest_rvv.judge.applicable import RECORD_HINT, ApplicableBaselines
from pytest_rvv.judge.baselines import Baseline
from pytest_rvv.judge.gate import DRAM_FAIL_PERCENT, GateResult, check_traffic, delta_text
from pytest_rvv.judge.outcome import Verdict, failed, passed
from pytest_rvv.judge.policy import CHANGED, EXACT, IMPROVED, OK, REGRESSED, TIME_METRICS, Row, compare, table
from pytest_rvv.measure.matching import match_dispatches, pair_name
from pytest_rvv.measure.metrics import (
    DIAGNOSTIC,
    EXECUTED_DISPATCH_INSTRUCTIONS,
    MACHINE_BOUND,
    PORTABLE,
    SILICON,
    kind_of,
    metric_info,
    split,
)
from pytest_rvv.measure.performance import PerfResult

TIMES = frozenset(TIME_METRICS)


@dataclass
class PerfVerdict:
    """Rows per kind, plus the lines to show (notes, improvements)."""

    model: str
    target: str
    portable: list[Row] = field(default_factory=list)
    machine_bound: list[Row] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    has_portable: bool = False  # this target has portable metrics at all (host has none)
    portable_path: str = ""
    machine_path: str = ""
    upgrade: tuple[str, str] | None = None  # (recorded with, now) when the toolchain changed
    portable_missing: bool = False  # portable metrics measured, no portable baseline recorded
    strict: bool = False  # --rvv-strict-baselines: any difference, and a missing baseline, fails
    traffic: GateResult = field(default_factory=GateResult)  # DRAM bytes per dispatch vs the baseline's (rule (g))
    record: str = RECORD_HINT  # the command that records this cell's baselines (its suite and selection)

    @property
    def rows(self) -> list[Row]:
        return self.portable + self.machine_bound

    @property
    def regressed(self) -> bool:
        return any(r.status == REGRESSED for r in self.rows) or bool(self.traffic.regressions)

    @property
    def differs(self) -> bool:
        return any(r.differs for r in self.rows) or bool(self.traffic.regressions or self.traffic.improvements)

    @property
    def improvements(self) -> list[str]:
        better = [r for r in self.rows if r.status == IMPROVED]
        if not better and not self.traffic.improvements:
            return []
        listed = ", ".join([f"{r.metric} {r.change()}" for r in better] + self.traffic.improvements)
        return [f"{self.model} on {self.target}: {listed} (record: {self.record} -k '[{self.model}-{self.target}]')"]

    @property
    def decision(self) -> Verdict:
        """Pass, or fail with the table: on a regression; with ``strict`` on any difference or a missing portable
        baseline. Records the rows, notes and improvements for the reports either way."""
        records = {"perf_rows": [(r.metric, r.baseline, r.now, r.status) for r in self.rows],
                   "notes": list(self.notes), "improvements": list(self.improvements)}
        if self.portable_missing and self.strict:
            return failed(f"no performance baseline {self.portable_path}: record one with --update-baselines",
                          **records)
        if self.regressed or (self.strict and self.differs):
            what = "performance regression" if self.regressed else "differs from its baseline (strict)"
            return failed(f"{what}: {self.model} on {self.target}\n{self.render()}", **records)
        return passed(**records)

    def render(self) -> str:
        parts = [f"upgrade review: baseline recorded with {self.upgrade[0]}; now {self.upgrade[1]}"] \
            if self.upgrade else []
        if self.portable:
            parts.append(f"portable metrics vs {self.portable_path}:\n{table(self.portable)}")
        if self.machine_bound:
            parts.append(f"machine-bound metrics vs {self.machine_path}:\n{table(self.machine_bound)}")
        if self.traffic.regressions:
            parts.append(f"modelled DRAM traffic per dispatch vs {self.portable_path}, most added first:\n"
                         + "\n".join(f"  {line}" for line in self.traffic.regressions))
        return "\n".join(parts + self.notes)


def upgrade_review(rows: list[Row], added_work: float) -> list[Row]:
    """After a toolchain upgrade: only added work beyond ``added_work`` percent fails; sizes and
    smaller moves are listed as changes (churn), decreases as improvements."""
    reviewed = []
    for row in rows:
        if row.allowed != EXACT or row.status in (OK, CHANGED) or row.baseline is None or row.now is None:
            reviewed.append(row)
            continue
        grew = row.added() * 100
        metric = metric_info(row.metric)
        if metric is not None and metric.work and grew > added_work:
            status = REGRESSED
        elif grew < 0:
            status = IMPROVED
        else:
            status = CHANGED
        note = f"upgrade: fails above +{added_work:g}%" if metric is not None and metric.work else "upgrade"
        reviewed.append(replace(row, status=status, note=note))
    return reviewed


def _no_added_work_is_not_slower(times: list[Row], portable: list[Row]) -> list[Row]:
    """A slower time with no more executed work than the baseline's is the machine, not the code.

    Work is the verdict: with the dispatches executing the same instructions (counted exactly under QEMU) only the
    machine is left to blame (measured here: one run's CPU time doubled on a shared 2-core VM with identical executed
    instructions). With fewer, a slower emulated run is the emulator's cost per instruction or the machine (an A/B
    that vectorized mlp, 37,820 -> 1,628 instructions, once measured its 0.1 s QEMU run's CPU time +61 % under load).
    Only an emulated cell counts its work: a board's or a native run's times are judged as measured.
    """
    work = next((r for r in portable if r.metric == EXECUTED_DISPATCH_INSTRUCTIONS), None)
    if work is None or work.now is None or work.baseline is None or work.now > work.baseline:
        return times
    note = (f"same executed work ({int(work.now)} instructions): the machine was slower, not the code"
            if work.now == work.baseline else
            f"less executed work ({int(work.baseline)} -> {int(work.now)} instructions): the emulated run's time is "
            "the emulator's and the machine's, not the code's")
    return [replace(r, status=OK, note=note) if r.status == REGRESSED and r.metric in TIMES else r for r in times]


UPGRADED = ("iree_compile", "llvm_mca")  # a new compiler or a new llvm-mca (its core models) is a toolchain change
SHOWN_DISPATCHES = 5


def _toolchain_change(baseline: Baseline, result: PerfResult) -> tuple[str, str] | None:
    """(recorded with, now) when the compiler or llvm-mca differs from the baseline's."""
    before = baseline.toolchain
    changed = [k for k in UPGRADED if before.get(k) and result.toolchain.get(k)
               and before[k] != result.toolchain[k]]
    if not changed:
        return None
    return "; ".join(before[k] for k in changed), "; ".join(result.toolchain[k] for k in changed)


def _silicon_by_dispatch(rows: list[Row], baseline: Baseline, result: PerfResult) -> list[str]:
    """For each silicon estimate that moved: the dispatches that moved it most (matched across renumbering)."""
    lines = []
    for row in rows:
        family, _, core = row.metric.partition("@")
        before = (baseline.silicon or {}).get(core)
        now = result.silicon.get(core)
        if family != SILICON or row.status == OK or not before or not now:
            continue
        matching = match_dispatches(before, now)
        moved = sorted(((pair_name(a, b), before[a], now[b]) for a, b in matching.pairs if before[a] != now[b]),
                       key=lambda m: (-(m[2] - m[1]), m[0]))
        listed = "; ".join(f"{name} {old} -> {new} ({delta_text(old, new)})"
                           for name, old, new in moved[:SHOWN_DISPATCHES])
        lines.append(f"{row.metric} by dispatch (estimated cycles, most added first): {listed or 'none moved'}"
                     + (f"; and {len(moved) - SHOWN_DISPATCHES} more" if len(moved) > SHOWN_DISPATCHES else ""))
    return lines


def _traffic_review(baseline: Baseline, result: PerfResult) -> tuple[GateResult, list[str]]:
    """Rule (g) of judge/gate.py on each core whose DRAM bytes per dispatch the baseline holds: a dispatch whose
    modelled DRAM traffic grew by half again fails, named; a smaller move beyond the noise is a note. With the notes
    for a recorded core this run did not model."""
    review, notes = GateResult(), []
    for core, recorded in sorted((baseline.traffic or {}).items()):
        now = result.dram_per_dispatch(core)
        if not now:
            notes.append(f"DRAM traffic on {core} is in the baseline but was not modelled in this run, so not gated "
                         "(the kernel suite models it; model cells with --rvv-wall-time)")
            continue
        on_core = GateResult()
        check_traffic(on_core, {name: {"dram_bytes": n} for name, n in recorded.items()},
                      {name: {"dram_bytes": n} for name, n in now.items()}, cache_hierarchy(core).l1d.line)
        review.regressions += on_core.regressions
        review.improvements += on_core.improvements
        notes += [f"modelled DRAM traffic on {core} moved, below the +{DRAM_FAIL_PERCENT:g} % that fails: {line}"
                  for line in on_core.changes]
    return review, notes


def judge(applicable: ApplicableBaselines, result: PerfResult, target: Target, limits: Mapping[str, float],
          machine: Machine, strict: bool = False, added_work: float = 5.0, record: str = RECORD_HINT) -> PerfVerdict:
    """Compare ``result`` with the baselines in ``applicable`` that apply on ``machine`` (``record``: the command
    that records them, named in the lines that suggest it).

    With the toolchain unchanged, exact metrics gate exactly; when the portable baseline was
    recorded with another compiler, the run is an upgrade review (see upgrade_review) unless
    ``strict``. Its ``decision`` is the test's verdict.
    """
    parts = split(result.metrics, target)
    portable_now, bound_now = parts[PORTABLE], parts[MACHINE_BOUND]
    diagnostics = frozenset(m for m in portable_now if kind_of(m, target) == DIAGNOSTIC)
    verdict = PerfVerdict(result.model, result.target, has_portable=bool(portable_now),
                          portable_path=str(applicable.portable_path), machine_path=str(applicable.machine_path),
                          strict=strict, record=record)
    if applicable.portable is not None and portable_now:
        verdict.portable = compare(applicable.portable, portable_now, {}, limits, diagnostics)
        if upgrade := _toolchain_change(applicable.portable, result):
            verdict.upgrade = upgrade
            if not strict:
                verdict.portable = upgrade_review(verdict.portable, added_work)
        verdict.notes += _silicon_by_dispatch(verdict.portable, applicable.portable, result)
        verdict.traffic, traffic_notes = _traffic_review(applicable.portable, result)
        verdict.notes += traffic_notes
        unmeasured = sorted(m for m in applicable.portable.metrics
                            if m not in portable_now and kind_of(m, target) != DIAGNOSTIC)
        if unmeasured:  # never a silent hole in the gate: say which recorded metrics this run did not measure
            verdict.notes.append(f"not measured in this run, so not gated: {', '.join(unmeasured)} "
                                 f"({result.model} on {result.target}" + (f"; {'; '.join(result.notes)})"
                                                                          if result.notes else ")"))
    elif portable_now:
        verdict.portable_missing = True
        verdict.notes.append(f"baseline needed: {applicable.portable_path} (record it with --update-baselines)")
    if applicable.machine is not None:
        verdict.machine_bound = _no_added_work_is_not_slower(
            compare(applicable.machine, bound_now, result.samples, limits), verdict.portable)
        if not strict and (upgrade := _toolchain_change(applicable.machine, result)):
            verdict.upgrade = verdict.upgrade or upgrade  # e.g. the host target's sizes: churn, like the portable
            verdict.machine_bound = upgrade_review(verdict.machine_bound, added_work)
    if note := applicable.machine_note(machine, record):
        verdict.notes.append(note)
    return verdict
