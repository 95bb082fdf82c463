"""A toolchain comparison as the reports read it: ``ComparisonRecord``, what comparison/ab.py decided on one model x
target (``ToolchainComparison.record``), crossing xdist as plain data (``to_json``, read back once by ``from_json``)
and read by attribute in comparison/report.py, comparison/kernels.py and report/.

Every pair is (reference, under test): the reference toolchain's figure first.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class WorkMove:
    """The model's work, reference -> under test, in the first metric both sides have (comparison/ab.py ``work``)."""

    metric: str
    before: float
    after: float

    @property
    def added(self) -> float:
        """The fraction of work the toolchain under test adds (negative: less work)."""
        return (self.after - self.before) / self.before if self.before else 0.0


@dataclass(frozen=True)
class Moved:
    """One dispatch's figure, reference -> under test (instructions, or modelled DRAM bytes)."""

    name: str
    before: int
    after: int


@dataclass(frozen=True)
class PerCall:
    """The work of one call on both sides, the module load's once-only work left out: executed instructions (None
    unless both sides were counted), est. cycles per core, and modelled DRAM bytes where both sides were traced."""

    executed: tuple[int, int] | None = None
    cycles: dict[str, tuple[float | None, float | None]] = field(default_factory=dict)
    dram_bytes: tuple[int, int] | None = None


@dataclass(frozen=True)
class DramMoves:
    """Both sides' modelled DRAM traffic on ``core``'s caches: of one call, and the dispatches that moved most."""

    core: str
    per_call: tuple[int, int] | None
    dispatches: tuple[Moved, ...]


@dataclass(frozen=True)
class ComparisonRecord:
    """One model x target compared: the versions, the work that moved, the top dispatches by added work, the verdict's
    lines, and (with ``--rvv-report``) the whole rendered comparison as ``detail``."""

    model: str
    target: str
    under_test: str  # compiler version lines
    reference: str
    work: WorkMove | None = None
    per_call: PerCall | None = None
    counted: str = "executed"  # executed (emulated runs) or static
    time: tuple[float, float, float] | None = None  # CPU time under test / reference: fastest, pairs' min and max
    dispatches: tuple[Moved, ...] = ()  # the top three by added work
    changed: int = 0
    churn: int = 0
    unmatched: int = 0
    regressions: tuple[str, ...] = ()
    improvements: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    dram: DramMoves | None = None
    detail: str | None = None

    @property
    def key(self) -> tuple[str, str]:
        return self.model, self.target

    @property
    def added(self) -> float:
        """The fraction of work the toolchain under test adds over the reference (0 without work measured)."""
        return self.work.added if self.work is not None else 0.0

    def to_json(self) -> dict[str, Any]:
        """Plain data (lists, dicts, numbers, strings): what a test leaves on its report."""
        pc = self.per_call
        return {"model": self.model, "target": self.target, "under_test": self.under_test,
                "reference": self.reference,
                "work": None if self.work is None else [self.work.metric, self.work.before, self.work.after],
                "per_call": None if pc is None else (
                    {"executed": None if pc.executed is None else list(pc.executed),
                     "cycles": {core: list(pair) for core, pair in pc.cycles.items()}}
                    | ({"dram_bytes": list(pc.dram_bytes)} if pc.dram_bytes else {})),
                "counted": self.counted, "time": None if self.time is None else list(self.time),
                "dispatches": [[m.name, m.before, m.after] for m in self.dispatches], "changed": self.changed,
                "churn": self.churn, "unmatched": self.unmatched, "regressions": list(self.regressions),
                "improvements": list(self.improvements), "notes": list(self.notes)} | (
                {"dram": {"core": self.dram.core, "per_call": None if self.dram.per_call is None
                          else list(self.dram.per_call),
                          "dispatches": [[m.name, m.before, m.after] for m in self.dram.dispatches]}}
                if self.dram is not None else {}) | ({"detail": self.detail} if self.detail is not None else {})

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ComparisonRecord:
        """The record ``to_json`` wrote (the one reader of it)."""
        work, pc, dram, time = data.get("work"), data.get("per_call"), data.get("dram"), data.get("time")
        return cls(
            data["model"], data["target"], data["under_test"], data["reference"],
            None if not work else WorkMove(work[0], work[1], work[2]),
            None if pc is None else PerCall(
                None if not pc.get("executed") or None in pc["executed"] else _pair(pc["executed"]),
                {core: _pair(pair) for core, pair in pc.get("cycles", {}).items()},
                _pair(pc["dram_bytes"]) if pc.get("dram_bytes") else None),
            data.get("counted", "executed"), None if not time else (time[0], time[1], time[2]),
            tuple(Moved(*m) for m in data.get("dispatches", ())), data.get("changed", 0), data.get("churn", 0),
            data.get("unmatched", 0), tuple(data.get("regressions", ())), tuple(data.get("improvements", ())),
            tuple(data.get("notes", ())),
            None if dram is None else DramMoves(dram["core"], None if dram["per_call"] is None
                                                else _pair(dram["per_call"]),
                                                tuple(Moved(*m) for m in dram["dispatches"])),
            data.get("detail"))


def _pair(values: list[Any]) -> tuple[Any, Any]:
    before, after = values
    return before, after
