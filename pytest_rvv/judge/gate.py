"""The vectorization gate: compare a static-analysis snapshot with the recorded one.

Rules:
(a) a scalar target has no vector instruction at all;
(b) on a vector target, a dispatch that was vectorized in the recorded snapshot and now has no
    vector instruction fails, named with its counts before and after;
(c) the model's vector share may not fall by more than ``max_share_drop`` percentage points, except, in executed
    snapshots, when the model executes fewer instructions than recorded (vector code replaced by scalar code
    executes more: less work with a lower share is the vector work shrinking, a change);
(d) a dispatch newly vectorized is an improvement, never a failure; a higher vector share is only
    a change (share can rise while the work doubles);
(e) executed snapshots (``work=True``): a dispatch that executes more instructions than recorded
    is a regression of work, named with both counts, the most added work first; fewer is an
    improvement. With the toolchain unchanged any difference is real (exact); after a toolchain
    upgrade (``added_work`` percent given) only a dispatch or model executing more than that many
    percent more fails, and smaller moves are churn, reported as changes;
(f) microkernels (targets with ``--iree-llvmcpu-enable-ukernels``): on a vector target a dispatch whose
    microkernel is the generic (scalar) tile function fails whatever the snapshot says, named with it;
    a dispatch that ran on a microkernel in the snapshot and now carries none fails; another tile
    function is a change;
(g) memory traffic (two runs whose dispatches were traced through one core's cache model, ``check_traffic``): a
    matched dispatch whose modelled DRAM bytes grow by half again (DRAM_FAIL_PERCENT) fails like added executed work
    (it is added work of the memory system), named with its DRAM bytes before and after and its executed
    instructions' change, most added DRAM bytes first; as much less is an improvement; a smaller move beyond the
    noise is named as a change. The cache figures move with the memory layout (DRAM_NOISE): a move within the noise
    is never named, and no tighter threshold (added work, strict) applies to them;
(h) vector register spills (RISC-V snapshots that record them, ``vector_spills`` in the totals): a matched dispatch
    that spilled no vector register and now spills any fails, named with its spills, whatever the toolchain; a
    change in how many registers a dispatch spills (static: stored; executed: moved) is reported as a change.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pytest_rvv.compile.ukernels import GENERIC_SUFFIX, tile_functions
from pytest_rvv.config.targets import Target
from pytest_rvv.measure.dispatch_table import Counts, CountsSnapshot
from pytest_rvv.measure.matching import match_dispatches, pair_name

SHOWN = 10
# During an upgrade a dispatch whose work is below this share of the model's is churn, whatever its ratio.
SMALL_DISPATCH_SHARE = 0.001
# The cache model's run-to-run noise. The bytes and accesses a dispatch makes are exact (identical in every traced run);
# its L2 misses and write-backs are not quite: the runtime's own accesses before and between dispatches vary a little
# from run to run and leave other lines in the warm caches. Measured: every f32 kernel cell of 64^3, 256^3 and
# 81x41x19 on every path, traced 6 times each into a fresh store, moved its DRAM bytes by at most 0.88 % (97 lines,
# inner-tiled 256^3's matmul; docs/kernels.md); at 540x516x332 and the decode shapes 1x2048x512 and 1x896x4864, traced
# 4 times each, by at most 0.24 % (167 lines). A move must exceed both, with a margin of 2x: DRAM_NOISE_PERCENT of the
# dispatch's bytes and DRAM_NOISE_LINES lines, also where the rule is exact (--rvv-strict-baselines).
DRAM_NOISE_PERCENT = 2.0
DRAM_NOISE_LINES = 200
# Between two environments (a fresh clone with its own cache folder: other paths, so another memory layout) one
# decode cell moved further: 1x896x128's matmul 585 kB -> 607 kB (+4 %, 344 lines). Moves of that kind are named as
# changes; only a dispatch whose DRAM bytes grow by half again, 12x the largest move measured, fails.
DRAM_FAIL_PERCENT = 50.0


@dataclass
class GateResult:
    """Violations and regressions fail the test; improvements and changes are only reported.

    ``violations`` break rule (a), which holds whatever the snapshot says; ``regressions`` are
    rules (b) and (c), relative to the snapshot (an explicit update accepts them).
    """

    violations: list[str] = field(default_factory=list)
    regressions: list[str] = field(default_factory=list)
    improvements: list[str] = field(default_factory=list)
    changes: list[str] = field(default_factory=list)
    work: list[tuple[str, int, int]] = field(default_factory=list)  # (dispatch, before, after) that moved
    churn: int = 0  # dispatches whose work moved within the upgrade threshold

    @property
    def failures(self) -> list[str]:
        return self.violations + self.regressions

    @property
    def ok(self) -> bool:
        return not self.failures


def counts_text(d: Mapping[str, Any]) -> str:
    """``5 vector of 10 instructions``, of a snapshot's dispatch entry or totals."""
    return Counts.from_json(d).text()


def check_gate(
    previous: CountsSnapshot | Mapping[str, Any] | None, current: CountsSnapshot | Mapping[str, Any], target: Target,
    max_share_drop: float, work: bool = False, added_work: float | None = None,
) -> GateResult:
    """Rules (a)-(f) and (h) on ``current`` against the recorded ``previous`` (snapshot records, or read already)."""
    now = current if isinstance(current, CountsSnapshot) else CountsSnapshot.from_json(current)
    result = GateResult()
    if not target.has_vector and now.totals.vector:
        offenders = [(k, d.vector) for k, d in now.dispatches.items() if d.vector]
        listing = ", ".join(f"{k} ({n})" for k, n in offenders[:SHOWN])
        result.violations.append(
            f"{target.name} is a scalar target but its code has {now.totals.vector} vector instructions: "
            f"{listing}" + (f" and {len(offenders) - SHOWN} more" if len(offenders) > SHOWN else "")
        )
    if target.has_vector:  # (f) a microkernel that fell back to scalar code
        for key, entry in now.dispatches.items():
            generic = [n for n in tile_functions(entry.ukernels) if n.endswith(GENERIC_SUFFIX)]
            if generic:
                result.violations.append(f"{key}: its microkernel is the generic scalar tile {', '.join(generic)} "
                                         f"on a vector target ({entry.text()})")
    if previous is None:
        return result
    was = previous if isinstance(previous, CountsSnapshot) else CountsSnapshot.from_json(previous)
    # (b) and (c) follow the snapshot: a target whose recorded code was vectorized is held to it
    # even if its flags lost +v.
    before, after = was.dispatches, now.dispatches
    matching = match_dispatches(before, after)  # a renumbered dispatch is the same dispatch
    moved: list[tuple[int, str]] = []  # (added instructions, line) of work beyond the threshold
    spills_known = was.spills_counted and now.spills_counted
    if now.spills_counted and not spills_known:  # said, so that an old snapshot is no silent hole in (h)
        result.changes.append("the snapshot was recorded before vector spills were counted: they are not judged until "
                              "--snapshot-update records them")
    for old_key, new_key in matching.pairs:
        old, new, key = before[old_key], after[new_key], pair_name(old_key, new_key)
        if old.vectorized and not new.vectorized:
            result.regressions.append(f"{key}: was vectorized ({old.text()}), now scalar ({new.text()})")
        elif not old.vectorized and new.vectorized:
            result.improvements.append(f"{key}: now vectorized ({old.text()} -> {new.text()})")
        old_tiles, new_tiles = tile_functions(old.ukernels), tile_functions(new.ukernels)
        if old_tiles and not new_tiles:
            result.regressions.append(f"{key}: ran on microkernel {', '.join(old_tiles)}, now on none "
                                      f"({old.text()} -> {new.text()})")
        elif old_tiles != new_tiles and old_tiles:
            result.changes.append(f"{key}: microkernel {', '.join(old_tiles)} -> {', '.join(new_tiles)}")
        if spills_known:
            _judge_spills(result, key, old, new, "moved" if work else "stored")
        if work and new.instructions != old.instructions:
            _judge_work(result, key, old.instructions, new.instructions, was.totals.instructions, added_work, moved)
    # (e) ranked: most added work first among the regressions, most removed first among the improvements
    result.regressions += [line for delta, line in sorted(moved, key=lambda m: -m[0]) if delta > 0]
    result.improvements += [line for delta, line in sorted(moved, key=lambda m: m[0]) if delta < 0]
    if matching.renamed:
        result.changes.append(f"{len(matching.renamed)} dispatches renumbered, matched by what they compute: "
                              + ", ".join(pair_name(a, b) for a, b in matching.renamed[:3])
                              + (", ..." if len(matching.renamed) > 3 else ""))
    for key in matching.removed:
        result.changes.append(f"{key}: no longer present (fused, split or gone; {before[key].text()})")
    for key in matching.added:
        result.changes.append(f"{key}: new dispatch ({after[key].text()})")
    before_total, after_total = was.totals.instructions, now.totals.instructions
    # the model as a whole, during an upgrade
    if work and added_work is not None and after_total > before_total * (1 + added_work / 100):
        result.regressions.append(f"the model executes {before_total} -> {after_total} instructions "
                                  f"({(after_total - before_total) / before_total * 100:+.1f}%; allowed "
                                  f"+{added_work:g}% during an upgrade)")
    old_share, new_share = was.share, now.share
    if old_share - new_share > max_share_drop and work and after_total < before_total:
        result.changes.append(f"vector share fell from {old_share:.2f}% to {new_share:.2f}% while the model executes "
                              f"{before_total} -> {after_total} instructions (a diagnostic: the work is the verdict)")
    elif old_share - new_share > max_share_drop:
        result.regressions.append(
            f"vector share fell from {old_share:.2f}% to {new_share:.2f}% "
            f"({new_share - old_share:+.2f} points; allowed -{max_share_drop:g})"
        )
    elif new_share > old_share:
        result.changes.append(f"vector share rose from {old_share:.2f}% to {new_share:.2f}% (a diagnostic, not "
                              "an improvement by itself)")
    if (before_total, was.totals.vector) != (after_total, now.totals.vector):
        result.changes.append(f"totals: {was.totals.text()} -> {now.totals.text()}")
    return result


def spills_text(counts: Counts, verb: str) -> str:
    spills = counts.spills or {}
    if "stores" in spills:
        return f"{spills['stores']} stores and {spills['reloads']} reloads, {spills['registers']} registers {verb}"
    executed = f"{spills['instructions']} spill instructions executed, " if "instructions" in spills else ""
    return f"{executed}{spills.get('registers', 0)} registers {verb}"


def _judge_spills(result: GateResult, key: str, old: Counts, new: Counts, verb: str) -> None:
    """Rule (h): a dispatch that starts spilling vector registers fails; a change in its spills is named."""
    before, after = old.spilled, new.spilled
    if before == 0 and after:
        result.regressions.append(f"{key}: now spills vector registers ({spills_text(new, verb)}), none before")
    elif before != after:
        result.changes.append(f"{key}: vector spills {before} -> {after} registers {verb}")


def _judge_work(result: GateResult, key: str, before: int, after: int, model_total: int,
                added_work: float | None, moved: list[tuple[int, str]]) -> None:
    """One dispatch's executed work moved: a regression or an improvement (into ``moved``, ranked by the caller), or
    (during an upgrade) churn."""
    delta = after - before
    result.work.append((key, before, after))
    line = f"{key}: executes {before} -> {after} instructions ({delta_text(before, after)})"
    if added_work is not None:
        small = abs(delta) < SMALL_DISPATCH_SHARE * model_total
        if small or abs(delta) <= before * added_work / 100:
            result.churn += 1
            return
    moved.append((delta, line))


@dataclass(frozen=True)
class TrafficMove:
    """A matched dispatch whose modelled DRAM bytes moved beyond the noise; ``work`` is its executed instructions'
    change in percent (None where they were not counted on both sides)."""

    name: str
    before: int
    after: int
    work: float | None = None

    @property
    def added(self) -> int:
        return self.after - self.before

    @property
    def percent(self) -> float:
        return 100 * self.added / self.before if self.before else math.inf

    def text(self) -> str:
        """``dispatch_0: DRAM traffic 1.2 MB -> 2.4 MB (+100 %), executed instructions +0.0 %``."""
        work = "" if self.work is None else f", executed instructions {self.work:+.1f} %"
        percent = f"{self.percent:+.0f} %" if self.before else "none before"
        return f"{self.name}: DRAM traffic {bytes_text(self.before)} -> {bytes_text(self.after)} ({percent}){work}"


def check_traffic(result: GateResult, before: dict[str, dict[str, Any]], after: dict[str, dict[str, Any]],
                  line: int) -> list[TrafficMove]:
    """Rule (g): ``before`` and ``after`` map dispatch -> ``{"dram_bytes": ..., "instructions": ...}`` (executed
    instructions optional), traced through the same core's caches (``line``-byte lines). Dispatches are matched across
    renumbering; one whose DRAM bytes grow by DRAM_FAIL_PERCENT is a regression, one that shrinks as much (to 1 /
    1.5) an improvement, any other move beyond the noise a change; the lines ranked by DRAM bytes added (most first).
    Returns the moves beyond the noise, most added first."""
    matching = match_dispatches(before, after)
    model_dram = sum(int(d["dram_bytes"]) for d in before.values())
    moves = []
    for old_key, new_key in matching.pairs:
        old, new = before[old_key], after[new_key]
        b, a = int(old["dram_bytes"]), int(new["dram_bytes"])
        if within_noise(b, a, line):
            continue
        counted = old.get("instructions"), new.get("instructions")
        work = (100 * (counted[1] - counted[0]) / counted[0] if counted[0] else 0.0) if None not in counted else None
        moves.append(TrafficMove(pair_name(old_key, new_key), b, a, work))
    moves.sort(key=lambda m: (-m.added, m.name))
    grows = 1 + DRAM_FAIL_PERCENT / 100
    for move in moves:
        small = abs(move.added) < SMALL_DISPATCH_SHARE * model_dram
        if not small and move.after >= move.before * grows:
            result.regressions.append(move.text())
        elif not small and move.after * grows <= move.before:
            result.improvements.append(move.text())
        else:
            result.changes.append(move.text())
    return moves


def within_noise(before: int, after: int, line: int) -> bool:
    """Whether a dispatch's DRAM bytes moved no further than the cache model's run-to-run noise (DRAM_NOISE)."""
    return abs(after - before) <= max(before * DRAM_NOISE_PERCENT / 100, DRAM_NOISE_LINES * line)


def bytes_text(n: int) -> str:
    """``1.2 MB``, ``1.03 MB``, ``400 kB``, ``64 B``: three significant digits, decimal units."""
    return f"{n / 1e6:.3g} MB" if n >= 1e6 else f"{n / 1e3:.3g} kB" if n >= 1e3 else f"{n} B"


def delta_text(before: int, after: int) -> str:
    """``+900, +90.0%``: how far a count moved, absolute and relative."""
    delta = after - before
    percent = delta / max(before, 1) * 100
    return f"{delta:+d}, {percent:+.{2 if abs(percent) < 1 else 1}f}%"
