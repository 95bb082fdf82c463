"""Two toolchains side by side on one model x target, in one run on one machine (``--rvv-compare``).

Both compile through the same cache and run on the same runner kind; timed runs interleave
(A B, B A, ...) so the machine's drift falls on both. The verdict reuses the upgrade review:
executed work added beyond ``added_work`` percent fails, per dispatch (matched across
renumbering) and per model; sizes and smaller moves are churn; less work is an improvement.
Given a wall-time request (the kernel suite's cells, or ``--rvv-wall-time``), both sides' memory traffic is traced
through its core's caches too, and a dispatch whose modelled DRAM bytes grow by half again fails the same way
(judge/gate.py rule (g)), whatever its instructions did; a smaller move beyond the cache model's noise is named.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from pytest_rvv.base.errors import CompileFailed, PathUnavailable, RuntimeNotProvided
from pytest_rvv.comparison.record import ComparisonRecord, DramMoves, Moved, PerCall, WorkMove
from pytest_rvv.config.cores import WallRequest, cache_hierarchy
from pytest_rvv.config.machine import Machine
from pytest_rvv.config.targets import HOST, Target
from pytest_rvv.judge.applicable import ApplicableBaselines
from pytest_rvv.judge.baselines import Baseline
from pytest_rvv.judge.gate import GateResult, TrafficMove, bytes_text, check_gate, check_traffic, delta_text
from pytest_rvv.judge.verdict import PerfVerdict, judge
from pytest_rvv.measure.agreement import CheckedRun
from pytest_rvv.measure.asmdiff import dispatch_listing, mnemonic_changes, unified
from pytest_rvv.measure.dispatch_table import Counts, CountsSnapshot
from pytest_rvv.measure.matching import match_dispatches, pair_name
from pytest_rvv.measure.metrics import (
    CPU_S,
    EXECUTED_DISPATCH_INSTRUCTIONS,
    EXECUTED_PER_CALL_INSTRUCTIONS,
    MACHINE_BOUND,
    PORTABLE,
    STATIC_INSTRUCTIONS,
    split,
)
from pytest_rvv.measure.performance import PerfResult, TimedRuns, add_traffic, compile_side
from pytest_rvv.measure.static import analyze
from pytest_rvv.model.model import Model
from pytest_rvv.run.runner import Runner
from pytest_rvv.session import RvvSession

SHOWN_DISPATCHES = 12
SHOWN_ASM_LINES = 30


@dataclass(frozen=True)
class DispatchChange:
    """One matched dispatch whose counts differ: reference (before) and under test (after)."""

    name: str
    before: Counts
    after: Counts
    before_key: str
    after_key: str

    @property
    def added(self) -> int:
        return self.after.instructions - self.before.instructions


@dataclass
class ToolchainComparison:
    """The side-by-side result of one model x target: verdicts, changed dispatches, the asm diff."""

    model: str
    target: str
    under_test: str  # compiler version lines
    reference: str
    counted: str = "executed"  # what the dispatch counts are: executed (emulated runs) or static
    verdict: PerfVerdict | None = None
    gate: GateResult | None = None  # dispatch-level work (executed) or static vectorization
    changes: list[DispatchChange] = field(default_factory=list)  # most added work first
    unmatched: list[str] = field(default_factory=list)
    churn: int = 0
    asm: tuple[str, list[str]] | None = None  # (dispatch, unified diff lines)
    asm_mix: str = ""  # the mnemonics whose count moved in that dispatch
    notes: list[str] = field(default_factory=list)
    results: tuple[PerfResult, PerfResult] | None = None  # (under test, reference)
    disagreement: CheckedRun | None = None  # a run of either toolchain that disagreed with onnxruntime: no verdict
    dram_core: str | None = None  # the core whose caches both sides' traffic was traced through (a wall-time request)
    traffic: list[TrafficMove] = field(default_factory=list)  # dispatches whose DRAM bytes moved, most added first

    @property
    def regressions(self) -> list[str]:
        rows = self.verdict.rows if self.verdict else []
        return [*(self.gate.failures if self.gate else []),
                *(f"{r.metric}: {r.change()}" + (f" ({r.note})" if r.note else "") for r in rows if not r.ok)]

    @property
    def improvements(self) -> list[str]:
        better = self.gate.improvements if self.gate else []
        rows = self.verdict.rows if self.verdict else []
        return [*better, *(f"{r.metric} {r.change()}" for r in rows if r.status == "improved")]

    @property
    def work(self) -> WorkMove | None:
        """The model's work, reference -> under test: executed instructions of one call (the module load's once-only
        work left out), else of the run, else static instructions."""
        if self.results is None:
            return None
        now, before = (r.metrics for r in self.results)
        for metric in (EXECUTED_PER_CALL_INSTRUCTIONS, EXECUTED_DISPATCH_INSTRUCTIONS, STATIC_INSTRUCTIONS):
            if metric in now and metric in before:
                return WorkMove(metric, before[metric], now[metric])
        return None

    @property
    def per_call(self) -> PerCall | None:
        """The work of one call on both sides: executed instructions and estimated cycles per core, the module load's
        once-only work left out (the kernel dashboard's before/after)."""
        if self.results is None:
            return None
        now, before = self.results
        executed = [r.metrics.get(EXECUTED_PER_CALL_INSTRUCTIONS) for r in (before, now)]
        cores = sorted(set(before.silicon) & set(now.silicon))
        return PerCall(None if executed[0] is None or executed[1] is None else (int(executed[0]), int(executed[1])),
                       {core: (before.per_call_cycles(core), now.per_call_cycles(core)) for core in cores},
                       self.dram)

    @property
    def dram(self) -> tuple[int, int] | None:
        """Modelled DRAM bytes of one call, (reference, under test) (the module load's dispatches left out); None
        unless both sides' traffic was traced."""
        if self.results is None or self.dram_core is None:
            return None
        moved = [r.per_call_traffic(self.dram_core) for r in reversed(self.results)]
        if moved[0] is None or moved[1] is None:
            return None
        return moved[0]["dram_bytes"], moved[1]["dram_bytes"]

    @property
    def time_ratio(self) -> tuple[float, float, float] | None:
        """Under test / reference CPU time: of the fastest runs, and the spread over the interleaved pairs."""
        if self.results is None:
            return None
        now, before = (r.samples.get(CPU_S, []) for r in self.results)
        pairs = [a / b for a, b in zip(now, before, strict=False) if b > 0]
        if not pairs or not min(before):
            return None
        return min(now) / min(before), min(pairs), max(pairs)

    def record(self, detail: str | None = None) -> ComparisonRecord:
        """What the terminal summary and reports show (``to_json`` crosses xdist); ``detail``: the whole rendering."""
        dram = self.dram
        return ComparisonRecord(
            self.model, self.target, self.under_test, self.reference, self.work, self.per_call, self.counted,
            self.time_ratio,
            tuple(Moved(c.name, c.before.instructions, c.after.instructions) for c in self.changes[:3]),
            len(self.changes), self.churn, len(self.unmatched), tuple(self.regressions), tuple(self.improvements),
            tuple(self.notes),
            DramMoves(self.dram_core, dram, tuple(Moved(m.name, m.before, m.after) for m in self.traffic[:3]))
            if self.dram_core is not None and dram is not None else None, detail)

    def render(self, asm_lines: int = SHOWN_ASM_LINES) -> str:
        """The dispatch table, the metric table and the top of the largest change's asm diff."""
        lines = [f"reference:  {self.reference}", f"under test: {self.under_test}"]
        if self.changes:
            lines.append(f"dispatches whose {self.counted} instructions moved (reference -> under test), "
                         "most added work first:")
            for change in self.changes[:SHOWN_DISPATCHES]:
                b, a = change.before, change.after
                lines.append(f"  {change.name}: {b.instructions} -> {a.instructions} "
                             f"({delta_text(b.instructions, a.instructions)}); vector {b.vector} -> {a.vector}")
            if len(self.changes) > SHOWN_DISPATCHES:
                lines.append(f"  ... and {len(self.changes) - SHOWN_DISPATCHES} more")
        elif self.gate is not None:
            lines.append(f"no dispatch's {self.counted} instruction count moved")
        lines += [f"  {line}" for line in self.unmatched]
        lines += self._traffic_lines()
        if self.churn:
            lines.append(f"  {self.churn} dispatches moved within the threshold (churn)")
        if self.verdict is not None and self.verdict.rows:
            lines.append(self.verdict.render())
        if self.asm is not None:
            name, diff = self.asm
            shown = diff[:asm_lines]
            lines.append(f"disassembly of {name} (reference -> under test, addresses normalized): "
                         f"{self.asm_mix}; {len(shown)} of {len(diff)} diff lines:" if diff else
                         f"disassembly of {name}: identical (the change is elsewhere: data, schedule or a callee)")
            lines += [f"  {line}" for line in shown]
        return "\n".join(lines + self.notes)

    def _traffic_lines(self) -> list[str]:
        if self.dram_core is None or self.dram is None:
            return []
        before, after = self.dram
        call = (f"one call's modelled DRAM traffic on {self.dram_core}'s caches: {bytes_text(before)} -> "
                f"{bytes_text(after)}" + (f" ({100 * (after - before) / before:+.1f} %)" if before else ""))
        if not self.traffic:
            return [f"{call}; no dispatch's moved beyond the cache model's noise"]
        return [f"{call}; dispatches whose DRAM traffic moved (reference -> under test), most added first:",
                *(f"  {m.text()}" for m in self.traffic[:SHOWN_DISPATCHES])]


def compare_toolchains(under_test: RvvSession, reference: RvvSession, model: Model, target: Target, repeat: int,
                       limits: dict[str, float], added_work: float, strict: bool,
                       max_share_drop: float, wall: WallRequest | None = None) -> ToolchainComparison:
    """Compile, check and measure ``model`` on ``target`` with both sessions' toolchains, and judge. With ``wall``
    (the kernel suite's cells, ``--rvv-wall-time``), both sides' memory traffic and est. wall time are measured on
    its core too (measure/performance.py ``add_traffic``), and their DRAM bytes judged per dispatch.

    A compile failure of the toolchain under test raises (the test fails); one of the reference is
    a note (the toolchain under test compiles what the reference could not).
    """
    comparison = ToolchainComparison(model.name, target.name, under_test.toolchain.compiler_version,
                                     reference.toolchain.compiler_version)
    runner_a, runner_b = _runner(under_test, target), _runner(reference, target)
    cell_a = under_test.cell(model, target, runner_a)
    result_a = compile_side(cell_a)
    try:
        cell_b = reference.cell(model, target, runner_b)
    except CompileFailed as exc:
        comparison.notes.append(f"improvement: the reference toolchain could not compile it ({exc})")
        return comparison
    except PathUnavailable as exc:
        comparison.notes.append(f"the reference could not run this cell ({exc}); the toolchain under test did")
        return comparison
    result_b = compile_side(cell_b)
    if runner_a is not None and runner_b is not None:
        with tempfile.TemporaryDirectory(prefix="pytest-rvv-ab-") as tmp:
            traced_on = wall.core.name if wall is not None else None
            runs_a = TimedRuns(cell_a, Path(tmp) / "a", traced_on)
            runs_b = TimedRuns(cell_b, Path(tmp) / "b", traced_on)
            for i in range(repeat):  # interleaved, alternating which goes first
                for runs in ((runs_a, runs_b) if i % 2 == 0 else (runs_b, runs_a)):
                    runs.once()
            runs_a.into(result_a)
            runs_b.into(result_b)
        if disagreement := result_a.disagreement or result_b.disagreement:  # judge/ refuses the numbers
            comparison.disagreement = disagreement
            return comparison
        if wall is not None:
            add_traffic(cell_a, result_a, wall)
            add_traffic(cell_b, result_b, wall)
    else:
        comparison.notes.append("run-side metrics need a runtime for this target for both toolchains")
    comparison.results = (result_a, result_b)
    comparison.verdict = _judge_metrics(result_b, result_a, target, limits, added_work, strict, under_test.machine)
    if result_a.executed is not None and result_b.executed is not None:
        was, now = result_b.executed, result_a.executed
    elif target.arch != HOST:
        comparison.counted = "static"
        was = CountsSnapshot.from_json(analyze(cell_b.artifact, cell_b.store, cell_b.stages).snapshot())
        now = CountsSnapshot.from_json(analyze(cell_a.artifact, cell_a.store, cell_a.stages).snapshot())
    else:
        return comparison
    comparison.gate = check_gate(was, now, target, max_share_drop, work=comparison.counted == "executed",
                                 added_work=None if strict else added_work)
    comparison.churn = comparison.gate.churn
    _dispatch_changes(comparison, was, now)
    if wall is not None and comparison.counted == "executed":
        _traffic_changes(comparison, result_b, result_a, wall.core.name)
    if comparison.changes and target.arch != HOST:
        top = comparison.changes[0]
        arch = target.arch
        old = dispatch_listing(cell_b.artifact.executables, arch, top.before_key)
        new = dispatch_listing(cell_a.artifact.executables, arch, top.after_key)
        comparison.asm = (top.name, unified(old, new, f"reference/{top.before_key}", f"under-test/{top.after_key}"))
        comparison.asm_mix = mnemonic_changes(old, new)
    return comparison


def _runner(session: RvvSession, target: Target) -> Runner | None:
    try:
        return session.runner(target)
    except RuntimeNotProvided:
        return None


def _judge_metrics(reference: PerfResult, now: PerfResult, target: Target, limits: dict[str, float],
                   added_work: float, strict: bool, machine: Machine) -> PerfVerdict:
    """The metric rows of ``now`` against the reference toolchain's, by the upgrade review's rules."""
    parts = split(reference.metrics, target)
    label = "the reference toolchain"
    model, target_name = reference.model, reference.target
    applicable = ApplicableBaselines(
        portable=Baseline(model, target_name, reference.toolchain, parts[PORTABLE], silicon=reference.silicon),
        portable_path=Path(label),
        machine=Baseline(model, target_name, reference.toolchain, parts[MACHINE_BOUND], samples=reference.samples),
        machine_path=Path(label), other_machines=())
    verdict = judge(applicable, now, target, limits, machine, strict=strict, added_work=added_work)
    verdict.upgrade = None  # both versions head the comparison already
    return verdict


def _traffic_changes(comparison: ToolchainComparison, reference: PerfResult, now: PerfResult, core: str) -> None:
    """Judge both sides' DRAM bytes per dispatch (judge/gate.py rule (g)) when both were traced on ``core``; a note
    when one was not (add_traffic's notes say why)."""
    moved = [r.traffic.get(core) for r in (reference, now)]
    if moved[0] is None or moved[1] is None:
        why = [n for n in reference.notes + now.notes if n.startswith("no memory traffic")]
        comparison.notes.append(f"no DRAM traffic compared: {'; '.join(why) or 'not traced'}")
        return
    assert comparison.gate is not None and reference.executed is not None and now.executed is not None
    sides = [{name: {"dram_bytes": figures["dram_bytes"],
                     "instructions": executed[name].instructions if name in executed else None}
              for name, figures in traffic.items()}
             for traffic, executed in zip(moved, (reference.executed.dispatches, now.executed.dispatches), strict=True)]
    comparison.dram_core = core
    comparison.traffic = check_traffic(comparison.gate, sides[0], sides[1], cache_hierarchy(core).l1d.line)


def _dispatch_changes(comparison: ToolchainComparison, before: CountsSnapshot, after: CountsSnapshot) -> None:
    old, new = before.dispatches, after.dispatches
    matching = match_dispatches(old, new)
    changes = [DispatchChange(pair_name(a, b), old[a], new[b], a, b) for a, b in matching.pairs
               if (old[a].instructions, old[a].vector) != (new[b].instructions, new[b].vector)]
    comparison.changes = sorted(changes, key=lambda c: (-c.added, c.name))
    comparison.unmatched = [f"{k}: only in the reference ({old[k].instructions} instructions)"
                            for k in matching.removed]
    comparison.unmatched += [f"{k}: only under test ({new[k].instructions} instructions)" for k in matching.added]
