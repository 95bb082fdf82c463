"""The per-dispatch table of one cell (a model on a target with one toolchain): the measurement the history, the
results file and the change list read by attribute.

A row holds what is exact about one dispatch: its static instructions, vector instructions and vector registers
spilled in the shipped object, and what the counted run executed of them (instructions, vector instructions, vector
registers moved by spills). A fact that was not measured is None, never 0.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from pytest_rvv.measure.static import natural_order

STATIC, EXECUTED = "static", "executed"


@dataclass(frozen=True)
class DispatchRow:
    """One dispatch's exact facts (None: not measured in this run)."""

    name: str
    instructions: int | None = None  # static, in the shipped object
    vector: int | None = None
    spilled_registers: int | None = None  # vector registers its spill stores write
    executed: int | None = None  # executed by the counted run (the module's load and one call)
    executed_vector: int | None = None
    executed_spills: int | None = None  # vector registers moved by executed spills and reloads
    one_time: int | None = None  # of ``executed``, what the module's load alone executes (its initializers)
    ukernels: tuple[str, ...] = ()  # microkernels inlined into it (compile/ukernels.py)

    @property
    def per_call(self) -> int | None:
        """What one call executes: the counted run less the load (None unless both were counted)."""
        return self.executed - self.one_time if self.executed is not None and self.one_time is not None else None

    @property
    def work(self) -> int | None:
        """The work the history follows: per call where the load was counted, else the counted run, else static."""
        for value in (self.per_call, self.executed, self.instructions):
            if value is not None:
                return value
        return None

    @property
    def vector_share(self) -> float | None:
        """Executed vector share in percent where counted, else static."""
        whole, part = (self.executed, self.executed_vector) if self.executed else (self.instructions, self.vector)
        return round(100 * part / whole, 2) if whole and part is not None else None

    def to_json(self) -> dict[str, Any]:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items() if v is not None and v != ()}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> DispatchRow:
        known = {f.name for f in fields(cls)}
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in data.items() if k in known})


# The exact metrics of a row, and how the history names each.
METRICS = {"per_call": "executed instructions per call", "one_time": "executed instructions at load",
           "executed": "executed instructions (load and call)", "instructions": "static instructions",
           "vector": "static vector instructions", "spilled_registers": "vector registers spilled",
           "executed_spills": "vector registers moved by executed spills"}


@dataclass(frozen=True)
class DispatchTable:
    """Every dispatch of one cell, in dispatch order."""

    model: str
    target: str
    rows: tuple[DispatchRow, ...]

    @property
    def by_name(self) -> dict[str, DispatchRow]:
        return {row.name: row for row in self.rows}

    def total(self, metric: str) -> int | None:
        """The sum of one metric over the dispatches (None when no dispatch measured it)."""
        values = [getattr(row, metric) for row in self.rows if getattr(row, metric) is not None]
        return sum(values) if values else None

    def to_json(self) -> dict[str, Any]:
        return {"model": self.model, "target": self.target, "dispatches": [row.to_json() for row in self.rows]}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> DispatchTable:
        return cls(str(data["model"]), str(data["target"]),
                   tuple(DispatchRow.from_json(row) for row in data.get("dispatches", ())))

    @classmethod
    def from_counts(cls, model: str, target: str, static: Mapping[str, DispatchCounts] | None,
                    executed: Mapping[str, DispatchCounts] | None, one_time: Mapping[str, int] | None = None
                    ) -> DispatchTable:
        """The table from a cell's static and executed counts per dispatch (the vectorization gate's records) and what
        its load alone executes (``one_time``: None where the load was not counted)."""
        rows: dict[str, DispatchRow] = {}
        for kind, counts in ((STATIC, static), (EXECUTED, executed)):
            for name, entry in (counts or {}).items():
                row = rows.get(name, DispatchRow(name))
                if entry.ukernels:
                    row = replace(row, ukernels=entry.ukernels)
                if kind == STATIC:
                    row = replace(row, instructions=entry.instructions, vector=entry.vector,
                                  spilled_registers=entry.spills)
                else:
                    row = replace(row, executed=entry.instructions, executed_vector=entry.vector,
                                  executed_spills=entry.spills,
                                  one_time=None if one_time is None else int(one_time.get(name, 0)))
                rows[name] = row
        return cls(model, target, tuple(rows[k] for k in sorted(rows, key=natural_order)))


@dataclass(frozen=True)
class DispatchCounts:
    """One dispatch's counts in a vectorization record: instructions, vector instructions, the vector registers its
    spills store (static) or move (executed) where spills were counted, and the microkernels inlined into it."""

    instructions: int
    vector: int
    spills: int | None = None
    ukernels: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return ({"instructions": self.instructions, "vector": self.vector}
                | ({"spills": self.spills} if self.spills is not None else {})
                | ({"ukernels": list(self.ukernels)} if self.ukernels else {}))

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> DispatchCounts:
        spills = data.get("spills")
        return cls(int(data["instructions"]), int(data["vector"]), None if spills is None else int(spills),
                   tuple(data.get("ukernels", ())))


@dataclass(frozen=True)
class Counts:
    """One dispatch's (or a model's) instructions of one kind, as a static or an executed snapshot records them."""

    instructions: int
    vector: int
    vectorized: bool
    ukernels: tuple[str, ...] = ()  # microkernels inlined into it (compile/ukernels.py)
    # vector spills where counted: static {stores, reloads, registers stored}, executed {instructions, registers moved}
    spills: Mapping[str, int] | None = None
    classes: Mapping[str, int] | None = None  # instructions per class (measure/classify.py) where recorded

    @property
    def spilled(self) -> int:
        """Vector registers its spills store (static) or move (executed); 0 where it spills none."""
        return int((self.spills or {}).get("registers", 0))

    def text(self) -> str:
        """``5 vector of 10 instructions``."""
        return f"{self.vector} vector of {self.instructions} instructions"

    def to_json(self) -> dict[str, Any]:
        """A snapshot's dispatch entry, as ``from_json`` reads it."""
        return ({"instructions": self.instructions, "vector": self.vector, "vectorized": self.vectorized}
                | ({"classes": dict(self.classes)} if self.classes is not None else {})
                | ({"spills": dict(self.spills)} if self.spills is not None else {})
                | ({"ukernels": list(self.ukernels)} if self.ukernels else {}))

    @classmethod
    def from_json(cls, data: Mapping[str, Any], spills_key: str = "spills") -> Counts:
        """A snapshot's dispatch entry (``spills``) or its totals (``vector_spills``)."""
        vector = int(data["vector"])
        return cls(int(data["instructions"]), vector, bool(data.get("vectorized", vector > 0)),
                   tuple(data.get("ukernels", ())), data.get(spills_key), data.get("classes"))


@dataclass(frozen=True)
class CountsSnapshot:
    """What the vectorization gate judges (judge/gate.py): a cell's counts of one kind, per dispatch and in total,
    read from a static or executed snapshot record (measure/static.py, measure/counts.py)."""

    totals: Counts
    share: float  # the model's vector share in percent
    dispatches: Mapping[str, Counts]

    @property
    def spills_counted(self) -> bool:
        """Whether vector spills were counted (RISC-V snapshots recorded since they are)."""
        return self.totals.spills is not None

    def to_json(self) -> dict[str, Any]:
        """The counts of an executed snapshot (its totals and dispatches), as ``from_json`` reads them."""
        return {"totals": {"instructions": self.totals.instructions, "vector": self.totals.vector,
                           "vector_share_percent": self.share}
                | ({"vector_spills": dict(self.totals.spills)} if self.totals.spills is not None else {}),
                "dispatches": {name: c.to_json() for name, c in self.dispatches.items()}}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CountsSnapshot:
        totals = data["totals"]
        return cls(Counts.from_json(totals, "vector_spills"), float(totals["vector_share_percent"]),
                   {name: Counts.from_json(entry) for name, entry in data["dispatches"].items()})


@dataclass(frozen=True)
class Attribution:
    """What one counted run executed, per dispatch (measure/counts.py ``attribute``): the counts the executed snapshot
    records, the instructions outside every dispatch, the watched instructions per dispatch (workgroup calls, vsetvl,
    vrgather, spilled registers) and, from an elements run, lane occupancy."""

    counts: CountsSnapshot
    outside: int  # executed instructions outside the dispatches (the runtime's)
    watched: Mapping[str, Mapping[str, int]]
    lanes: Mapping[str, Any] | None = None  # {vlen, total, dispatches} (measure/counts.py ``lane_occupancy``)

    @property
    def dispatches(self) -> Mapping[str, Counts]:
        return self.counts.dispatches

    @property
    def totals(self) -> Counts:
        """Over every dispatch (the runtime's code is left out)."""
        return self.counts.totals

    def with_ukernels(self, ukernels: Mapping[str, list[str]]) -> CountsSnapshot:
        """The counts, each dispatch with the microkernels inlined into it (compile/ukernels.py)."""
        return replace(self.counts, dispatches={
            name: replace(c, ukernels=tuple(ukernels[name])) if name in ukernels else c
            for name, c in self.counts.dispatches.items()})

    def snapshot(self, model: str, target: str, ukernels: Mapping[str, list[str]]) -> dict[str, Any]:
        """The executed snapshot: totals and dispatches, each with the microkernels inlined into it."""
        return {"model": model, "target": target} | self.with_ukernels(ukernels).to_json()

    def to_json(self) -> dict[str, Any]:
        """As the store keeps it (``attribute``'s own form)."""
        counted = self.counts.to_json()
        return {"dispatch_totals": counted["totals"], "dispatches": counted["dispatches"],
                "outside_dispatches": self.outside, "watched": {k: dict(v) for k, v in self.watched.items()}} | (
                    {"lanes": dict(self.lanes)} if self.lanes is not None else {})

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Attribution:
        return cls(CountsSnapshot.from_json({"totals": data["dispatch_totals"], "dispatches": data["dispatches"]}),
                   int(data["outside_dispatches"]), data.get("watched", {}), data.get("lanes"))
