"""One record per test: what a test leaves for the reports, typed and defined in one place.

A test's fixtures and pytest-rvv's hooks add fields with ``leave(sink, field=value, ...)``: ``sink`` is pytest's
``record_property`` (during the test) or a ``TestReport`` (in a report hook). Collectors read ``Record.of(report)``
and nothing else. Fields travel from xdist workers as plain values: each ``leave`` is one ``rvv`` user property,
and ``Record.of`` merges them in order (list fields add up, the others take the latest value).
``rvv.<metric>`` JUnit properties (performance metrics) are not part of it: they are for CI systems that read
``--junitxml``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any

RECORD = "rvv"


@dataclass
class Record:
    """What one test left; None (or empty) where it left nothing."""

    cell: tuple[str, str, str] | None = None  # (model, or "conformance", target, check): its cell in the HTML report
    check: tuple[str, str, str | None, str] | None = None  # correctness check: (target, model, failed phase, reason)
    agreement: tuple[str, str, float] | None = None  # (model, target, max abs error vs onnxruntime)
    vectorization: dict[str, Any] | None = None  # the vectorization gate's record (judge/snapshots.py)
    broken_snapshot: tuple[str, str] | None = None  # (path, its bytes as hex) of a damaged snapshot, kept whole
    lanes: dict[str, Any] | None = None  # lane occupancy per dispatch (counted element runs)
    performance: dict[str, Any] | None = None  # the measured metrics (measure/performance.py PerfResult.as_json)
    perf_rows: list[tuple[str, Any, Any, str]] | None = None  # (metric, baseline, now, verdict) of judged metrics
    notes: list[str] = field(default_factory=list)  # performance notes (shown grouped)
    improvements: list[str] = field(default_factory=list)  # passing improvements (--rvv-strict-baselines fails)
    conformance: tuple[str, str, str | None, str, bool] | None = None  # (target, node test, phase, message, ran)
    comparison: dict[str, Any] | None = None  # a toolchain comparison (comparison/ab.py)
    stages: dict[str, list[float]] | None = None  # this process's time per stage since the previous test
    stages_cell: str | None = None  # the model x target cell whose test did that work
    storage_fault: str | None = None  # the one line of a storage fault that stopped the test
    could_not_run: str | None = None  # why the test's toolchain could not run its cell
    compared: bool = False  # the test compared toolchains (--rvv-compare)
    estimator: dict[str, Any] | None = None  # the estimator against one published instruction timing
    peers: dict[str, Any] | None = None  # a cell beside its peer (measure/peers.py PeerComparison.row)
    published_row: dict[str, Any] | None = None  # a published row estimated with the release it is pinned to

    @classmethod
    def of(cls, report: Any) -> Record:
        """The record a report carries (an empty one when it carries none)."""
        record = cls()
        for name, value in getattr(report, "user_properties", ()):
            if name != RECORD:
                continue
            for key, item in value.items():
                if key in _LISTS:
                    getattr(record, key).extend(item)
                else:
                    setattr(record, key, item)
        return record


_FIELDS = {f.name for f in fields(Record)}
_LISTS = {f.name for f in fields(Record) if f.default_factory is list}  # fields that add up over leave() calls


def leave(sink: Callable[[str, Any], None] | Any, **values: Any) -> None:
    """Add fields to a test's record through ``record_property`` or onto a report."""
    unknown = set(values) - _FIELDS
    if unknown:
        raise TypeError(f"not a Record field: {', '.join(sorted(unknown))}")
    if callable(sink):
        sink(RECORD, values)
    else:
        sink.user_properties.append((RECORD, values))
