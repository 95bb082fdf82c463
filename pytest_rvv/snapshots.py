"""Snapshots of static vectorization counts, stored by syrupy's JSON extension as one file per test:
``__snapshots__/<module>/<test>[<model>-<target>].json``, readable and diff-friendly."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from syrupy.assertion import SnapshotAssertion

from pytest_rvv.analyze.gate import GateResult, check_gate
from pytest_rvv.targets import Target

VECTORIZATION_PROPERTY = "rvv_vectorization"


def recorded(snapshot: SnapshotAssertion) -> dict[str, Any] | None:
    """The snapshot stored for this test, or None when there is none (or it is unreadable)."""
    location = Path(snapshot.extension.get_location(test_location=snapshot.test_location, index=snapshot.index))
    try:
        return json.loads(location.read_text())
    except (OSError, ValueError):
        return None


def _counted(snapshot: dict[str, Any]) -> Any:
    """What a snapshot records about the code: totals and per-dispatch counts."""
    return snapshot.get("totals"), snapshot.get("dispatches")


def check_vectorization(
    snapshot: SnapshotAssertion,
    current: dict[str, Any],
    target: Target,
    *,
    max_share_drop: float,
    strict: bool,
    record_property: Any,
    kind: str = "static",
) -> GateResult:
    """Apply the gate against the recorded snapshot, then keep (or, when updating, rewrite) it.

    - updating (``--snapshot-update`` / ``--update-baselines``): the snapshot is rewritten and
      regressions are accepted; only a vector instruction on a scalar target still fails;
    - no snapshot yet: the test passes with a note (fails with ``--rvv-strict-baselines``);
    - otherwise the recorded snapshot stays as it is, accepted changes and improvements are
      reported in the terminal summary, and a regression fails with a dispatch-level message;
      with ``strict`` any difference from the snapshot fails.
    """
    model = current["model"]
    previous = recorded(snapshot)
    verdict = check_gate(previous, current, target, max_share_drop, work=kind == "executed")
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
        failures = verdict.failures
        if strict and not failures and _counted(previous) != _counted(current):
            failures = [f"differs from the recorded snapshot (--rvv-strict-baselines): "
                        f"{'; '.join(verdict.improvements + verdict.changes) or 'counts changed'}"]
    record_property(VECTORIZATION_PROPERTY, {
        "model": model, "target": target.name, "kind": kind,
        "vector": current["totals"]["vector"], "instructions": current["totals"]["instructions"],
        "not_vectorized": current.get("not_vectorized", []) if target.has_vector else [],
        "improvements": verdict.improvements, "changes": verdict.changes + notes,
    })
    if failures:
        pytest.fail(
            f"{kind} vectorization regression: {model} on {target.name}\n"
            + "\n".join(f"  {line}" for line in failures)
            + f"\nsnapshot: {where}\nif this is intended, rerun with --snapshot-update or --update-baselines",
            pytrace=False,
        )
    return verdict
