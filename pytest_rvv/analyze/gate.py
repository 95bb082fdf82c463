"""The vectorization gate: compare a static-analysis snapshot with the recorded one.

Rules:
(a) a scalar target has no vector instruction at all;
(b) on a vector target, a dispatch that was vectorized in the recorded snapshot and now has no
    vector instruction fails, named with its counts before and after;
(c) the model's vector share may not fall by more than ``max_share_drop`` percentage points;
(d) a dispatch newly vectorized is an improvement, never a failure; a higher vector share is only
    a change (share can rise while the work doubles);
(e) executed snapshots (``work=True``): a dispatch that executes more instructions than recorded
    is a regression of work, named with both counts; fewer is an improvement.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pytest_rvv.analyze.static import natural_order
from pytest_rvv.targets import Target

DEFAULT_MAX_SHARE_DROP = 5.0  # percentage points
SHOWN = 10


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

    @property
    def failures(self) -> list[str]:
        return self.violations + self.regressions

    @property
    def ok(self) -> bool:
        return not self.failures


def _counts(d: dict[str, Any]) -> str:
    return f"{d['vector']} vector of {d['instructions']} instructions"


def check_gate(
    previous: dict[str, Any] | None, current: dict[str, Any], target: Target, max_share_drop: float,
    work: bool = False,
) -> GateResult:
    result = GateResult()
    totals = current["totals"]
    if not target.has_vector and totals["vector"]:
        offenders = [(k, d["vector"]) for k, d in current["dispatches"].items() if d["vector"]]
        listing = ", ".join(f"{k} ({n})" for k, n in offenders[:SHOWN])
        result.violations.append(
            f"{target.name} is a scalar target but its code has {totals['vector']} vector instructions: "
            f"{listing}" + (f" and {len(offenders) - SHOWN} more" if len(offenders) > SHOWN else "")
        )
    if previous is None:
        return result
    # (b) and (c) follow the snapshot: a target whose recorded code was vectorized is held to it
    # even if its flags lost +v.
    before, after = previous["dispatches"], current["dispatches"]
    for key, old in sorted(before.items(), key=lambda kv: natural_order(kv[0])):
        new = after.get(key)
        if new is None:
            result.changes.append(f"{key}: no longer present (renamed, fused or split?)")
        elif old["vectorized"] and not new["vectorized"]:
            result.regressions.append(
                f"{key}: was vectorized ({_counts(old)}), now scalar ({_counts(new)})"
            )
        elif not old["vectorized"] and new["vectorized"]:
            result.improvements.append(f"{key}: now vectorized ({_counts(old)} -> {_counts(new)})")
        if work and new is not None and new["instructions"] != old["instructions"]:
            delta = new["instructions"] - old["instructions"]
            line = (f"{key}: executes {old['instructions']} -> {new['instructions']} instructions "
                    f"({delta:+d}, {delta / max(old['instructions'], 1) * 100:+.1f}%)")
            (result.regressions if delta > 0 else result.improvements).append(line)
    for key in sorted(after.keys() - before.keys(), key=natural_order):
        result.changes.append(f"{key}: new dispatch ({_counts(after[key])})")
    old_share, new_share = previous["totals"]["vector_share_percent"], totals["vector_share_percent"]
    if old_share - new_share > max_share_drop:
        result.regressions.append(
            f"vector share fell from {old_share:.2f}% to {new_share:.2f}% "
            f"({new_share - old_share:+.2f} points; allowed -{max_share_drop:g})"
        )
    elif new_share > old_share:
        result.changes.append(f"vector share rose from {old_share:.2f}% to {new_share:.2f}% (a diagnostic, not "
                              "an improvement by itself)")
    if (previous["totals"]["instructions"], previous["totals"]["vector"]) != (totals["instructions"], totals["vector"]):
        result.changes.append(
            f"totals: {_counts(previous['totals'])} -> {_counts(totals)}"
        )
    return result
