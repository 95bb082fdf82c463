"""A verdict: what judge/ decides about one test, in one shape.

It passes, fails with a message, is an expected failure with its reason, or is skipped with its reason; beside that,
the fields it leaves on the test's record for the reports (base/record.py). Every rule in judge/ returns one, and only
``fixtures.py`` turns it into pytest's outcome.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

PASSED = "passed"
FAILED = "failed"
XFAILED = "xfailed"  # an expected failure
SKIPPED = "skipped"


@dataclass(frozen=True)
class Verdict:
    """``outcome`` (PASSED, FAILED, XFAILED or SKIPPED), the message that says why (empty when it passes),
    ``records``: fields of the test's record, left whatever the outcome, and for a failure of a correctness check its
    ``phase``: it fails with that phase's error, which the phase's expected failures accept."""

    outcome: str = PASSED
    message: str = ""
    records: dict[str, Any] = field(default_factory=dict)
    phase: str | None = None  # a correctness check's phase (judge/expectations.py PHASES) a failure belongs to

    @property
    def failed(self) -> bool:
        return self.outcome == FAILED


def passed(**records: Any) -> Verdict:
    return Verdict(PASSED, "", records)


def failed(message: str, **records: Any) -> Verdict:
    return Verdict(FAILED, message, records)


def xfailed(reason: str, **records: Any) -> Verdict:
    return Verdict(XFAILED, reason, records)


def skipped(reason: str, **records: Any) -> Verdict:
    return Verdict(SKIPPED, reason, records)
