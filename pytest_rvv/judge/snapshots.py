"""Snapshots of static vectorization counts, stored by syrupy's JSON extension as one file per test:
``__snapshots__/<module>/<test>[<model>-<target>].json``, readable and diff-friendly."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from syrupy.assertion import SnapshotAssertion
from syrupy.extensions.json import JSONSnapshotExtension
from syrupy.location import PyTestLocation

from pytest_rvv.config.targets import Target
from pytest_rvv.judge.gate import GateResult, check_gate
from pytest_rvv.judge.outcome import FAILED, PASSED, Verdict
from pytest_rvv.judge.vectorization import VectorizationRecord
from pytest_rvv.measure.dispatch_table import CountsSnapshot, DispatchCounts


class SnapshotFiles(JSONSnapshotExtension):
    """syrupy's JSON extension, one file per test, answering "could this test own this file?" cheaply first.

    At the end of a session syrupy asks that for every unused snapshot file (another selection's: the kernel suite's,
    other models') and every test of its module, and its answer resolves both paths on disk each time: 28,756 pairs,
    14 s of a 49 s single-process rerun. A parametrized test owns a file only if the file's stem is the module's name,
    the test's parametrized name (or that name followed by ``.`` or ``[``), or a 255-character file name (syrupy's
    truncated long name); any other pair is answered False before syrupy's own check, which decides the rest.
    """

    @classmethod
    def matches_test_location(cls, *, test_location: PyTestLocation, snapshot_location: str) -> bool:
        path = Path(snapshot_location)
        if test_location.is_item_parametrized and len(path.name) < 255:
            stem, own = path.stem, test_location.snapshot_name_parametrized
            if stem != test_location.basename and stem != own and not stem.startswith((f"{own}.", f"{own}[")):
                return False
        return super().matches_test_location(test_location=test_location, snapshot_location=snapshot_location)


class BrokenSnapshot(Exception):
    """A snapshot file exists but does not parse as a pytest-rvv snapshot."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"{path}: {reason}; restore it from git (no update option rewrites it)")
        self.path = path


def recorded(snapshot: SnapshotAssertion) -> dict[str, Any] | None:
    """The snapshot stored for this test, or None when there is none.

    A file that does not parse raises BrokenSnapshot: it is never taken for a missing snapshot
    (whose hint, --snapshot-update, would overwrite it).
    """
    location = Path(snapshot.extension.get_location(test_location=snapshot.test_location, index=snapshot.index))
    try:
        data = json.loads(location.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise BrokenSnapshot(location, f"unreadable snapshot ({exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get("totals"), dict) or "dispatches" not in data:
        raise BrokenSnapshot(location, "not a pytest-rvv snapshot (no totals/dispatches)")
    return data


def _keep_in_use(snapshot: SnapshotAssertion, current: dict[str, Any]) -> None:
    """Have syrupy count a damaged snapshot file as used (and failed), never as unused.

    syrupy's report takes a snapshot as used only when an assertion ran on it (``report.used`` is
    built from each assertion's executions, and workers send it to the xdist controller); anything
    else it found on disk is "unused", which ``--snapshot-update`` deletes. It has no public call to
    mark a snapshot used, so compare through a copy of this assertion, built with its public
    constructor fields, that may not write: with ``update_snapshots=False`` a mismatch only fails
    (syrupy's summary: "1 snapshot failed", which is true), and the damaged file is never
    rewritten, reported unused or deleted. Its result is not used: the test fails next, naming the file.
    """
    reader = dataclasses.replace(snapshot, update_snapshots=False, update_new_snapshots_only=False)
    reader == current  # noqa: B015 (run for syrupy's bookkeeping; the damaged file never matches)


def _counted(snapshot: dict[str, Any]) -> Any:
    """What a snapshot records about the code: totals and per-dispatch counts."""
    return snapshot.get("totals"), snapshot.get("dispatches")


@dataclass(frozen=True)
class SnapshotVerdict(Verdict):
    """The verdict of the gate on one model x target against its snapshot, with the gate's result (None when the
    snapshot is damaged)."""

    gate: GateResult | None = None


def check_vectorization(
    snapshot: SnapshotAssertion,
    current: dict[str, Any],
    target: Target,
    *,
    max_share_drop: float,
    strict: bool,
    kind: str = "static",
    toolchain: str = "",
    added_work: float = 5.0,
    one_time: dict[str, int] | None = None,
) -> SnapshotVerdict:
    """Apply the gate against the recorded snapshot, then keep (or, when updating, rewrite) it; the verdict is
    returned (the fixture records ``records`` and fails the test when it failed). ``one_time`` (executed snapshots):
    what each dispatch executes while the module loads, carried in the record so that a call's work can be shown.

    - updating (``--snapshot-update`` / ``--update-baselines``): the snapshot is rewritten and
      regressions are accepted; only a vector instruction on a scalar target still fails;
    - no snapshot yet: the test passes with a note (fails with ``--rvv-strict-baselines``);
    - otherwise the recorded snapshot stays as it is, accepted changes and improvements are
      reported in the terminal summary, and a regression fails with a dispatch-level message;
      with ``strict`` any difference from the snapshot fails.
    """
    model = current["model"]
    try:
        previous = recorded(snapshot)
    except BrokenSnapshot as exc:
        broken: BrokenSnapshot | None = exc
    else:
        broken = None
    if broken is not None:  # failed outside the except block: the failure reads once
        _keep_in_use(snapshot, current)
        return SnapshotVerdict(FAILED, str(broken),
                               {"broken_snapshot": (str(broken.path), broken.path.read_bytes().hex())})
    current = {**current, "iree_compile": toolchain} if toolchain else current
    recorded_with = (previous or {}).get("iree_compile")
    upgrade = bool(recorded_with and toolchain and recorded_with != toolchain)
    verdict = check_gate(previous, current, target, max_share_drop, work=kind == "executed",
                         added_work=added_work if upgrade and not strict else None)
    where = snapshot.extension.get_location(test_location=snapshot.test_location, index=snapshot.index)
    notes = []
    if snapshot.update_snapshots:
        assert snapshot == current
        failures = verdict.violations
    elif previous is None:
        notes.append(f"no snapshot recorded yet ({Path(where).name}): --snapshot-update records it")
        failures = verdict.failures + ([notes[0]] if strict else [])
    else:
        assert snapshot == previous  # the recorded snapshot stays in use (syrupy reports unused ones)
        if upgrade and not verdict.failures:
            notes.append(f"recorded with {recorded_with}; now {toolchain}: review, then --update-baselines")
        failures = verdict.failures
        if strict and not failures and _counted(previous) != _counted(current):
            failures = [f"differs from the recorded snapshot (--rvv-strict-baselines): "
                        f"{'; '.join(verdict.improvements + verdict.changes) or 'counts changed'}"]
    counts = CountsSnapshot.from_json(current)
    record = VectorizationRecord(
        model, target.name, kind, counts.totals.instructions, counts.totals.vector,
        # for the HTML report's dispatch table and results.json's dispatch tables (measure/dispatch_table.py)
        {k: DispatchCounts(d.instructions, d.vector, d.spilled if counts.spills_counted else None, d.ukernels)
         for k, d in counts.dispatches.items()},
        tuple(current.get("not_vectorized", [])) if target.has_vector else (),
        tuple(verdict.improvements), tuple(verdict.changes + notes),
        (str(recorded_with), str(toolchain)) if upgrade else None, tuple(verdict.work), verdict.churn,
        CountsSnapshot.from_json(previous).totals if previous else None, one_time).to_json()
    if not failures:
        return SnapshotVerdict(PASSED, "", {"vectorization": record}, gate=verdict)
    failure = (f"{kind} vectorization regression: {model} on {target.name}\n"
               + "\n".join(f"  {line}" for line in failures)
               + f"\nsnapshot: {where}\nif this is intended, rerun with --snapshot-update or --update-baselines")
    return SnapshotVerdict(FAILED, failure, {"vectorization": record}, gate=verdict)
