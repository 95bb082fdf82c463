"""The vectorization gate's record of one cell and kind (static or executed): what judge/snapshots.py decided, typed.
It crosses from xdist workers as JSON (``to_json``/``from_json``, one round trip); the terminal summary, the upgrade
review, the HTML report and results.json's dispatch tables read its attributes."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pytest_rvv.measure.dispatch_table import Counts, DispatchCounts, DispatchTable

STATIC, EXECUTED = "static", "executed"


@dataclass(frozen=True)
class VectorizationRecord:
    """One cell's counts of one kind against its snapshot, and what the gate found."""

    model: str
    target: str
    kind: str  # STATIC or EXECUTED
    instructions: int
    vector: int
    dispatches: Mapping[str, DispatchCounts] = field(default_factory=dict)
    not_vectorized: tuple[str, ...] = ()  # dispatches with no vector instruction (RVV targets)
    improvements: tuple[str, ...] = ()
    changes: tuple[str, ...] = ()  # and the gate's notes (no snapshot yet, recorded with another toolchain)
    upgrade: tuple[str, str] | None = None  # (recorded with, now) when the snapshot's toolchain differs
    work: tuple[tuple[str, int, int], ...] = ()  # (dispatch, before, after) whose executed work moved
    churn: int = 0  # dispatches whose work moved within the upgrade threshold
    recorded_totals: Counts | None = None  # the snapshot's totals (None: no snapshot yet)
    one_time: Mapping[str, int] | None = None  # per dispatch, what the module's load alone executes (executed)

    @property
    def share(self) -> float:
        """Vector share in percent (0 for an empty cell)."""
        return 100.0 * self.vector / self.instructions if self.instructions else 0.0

    @property
    def changed(self) -> bool:
        return bool(self.improvements or self.changes)

    @property
    def resized(self) -> bool:
        """Its static size differs from the snapshot's."""
        before = self.recorded_totals
        return before is not None and (before.instructions, before.vector) != (self.instructions, self.vector)

    def to_json(self) -> dict[str, Any]:
        before = self.recorded_totals
        return {"model": self.model, "target": self.target, "kind": self.kind, "instructions": self.instructions,
                "vector": self.vector, "dispatches": {k: d.to_json() for k, d in self.dispatches.items()},
                "not_vectorized": list(self.not_vectorized), "improvements": list(self.improvements),
                "changes": list(self.changes), "upgrade": list(self.upgrade) if self.upgrade else None,
                "work": [list(w) for w in self.work], "churn": self.churn,
                "recorded_totals": None if before is None else
                {"instructions": before.instructions, "vector": before.vector, "vectorized": before.vectorized}
                | ({"vector_spills": dict(before.spills)} if before.spills is not None else {}),
                "one_time": None if self.one_time is None else dict(self.one_time)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> VectorizationRecord:
        before, upgrade, once = data.get("recorded_totals"), data.get("upgrade"), data.get("one_time")
        return cls(str(data["model"]), str(data["target"]), str(data.get("kind", STATIC)), int(data["instructions"]),
                   int(data["vector"]),
                   {k: DispatchCounts.from_json(d) for k, d in (data.get("dispatches") or {}).items()},
                   tuple(data.get("not_vectorized", ())), tuple(data.get("improvements", ())),
                   tuple(data.get("changes", ())), (str(upgrade[0]), str(upgrade[1])) if upgrade else None,
                   tuple((str(n), int(a), int(b)) for n, a, b in data.get("work", ())), int(data.get("churn", 0)),
                   None if before is None else Counts.from_json(before, "vector_spills"),
                   None if once is None else {str(k): int(v) for k, v in once.items()})


Records = dict[tuple[str, str, str], VectorizationRecord]  # (model, target, kind) -> its record


def dispatch_table(records: Records, model: str, target: str) -> DispatchTable:
    """A cell's dispatch table from its static and executed records."""
    static, executed = records.get((model, target, STATIC)), records.get((model, target, EXECUTED))
    return DispatchTable.from_counts(model, target, static.dispatches if static else None,
                                     executed.dispatches if executed else None,
                                     executed.one_time if executed else None)
