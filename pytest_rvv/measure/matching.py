"""Match the dispatches of two compiles of one model by what they compute, not by their index.

A newer compiler renumbers dispatches when it fuses or splits differently
(``dispatch_13_batch_matmul_4x64x64_f32`` becomes ``dispatch_12_batch_matmul_4x64x64_f32``).
Dispatches are matched by their name without the index (the operation, shapes and element
types IREE writes into it), in order of index when a name occurs more than once. What is left
is added (only after) or removed (only before); a renumbering alone is never a change.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pytest_rvv.measure.static import natural_order

_INDEX = re.compile(r"^dispatch_\d+_?")


def computes(key: str) -> str:
    """``dispatch_13_batch_matmul_4x64x64_f32`` -> ``batch_matmul_4x64x64_f32`` (what it computes)."""
    return _INDEX.sub("", key) or key


@dataclass
class Matching:
    """Dispatch pairs (before key, after key), and those only on one side."""

    pairs: list[tuple[str, str]] = field(default_factory=list)
    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)

    @property
    def renamed(self) -> list[tuple[str, str]]:
        return [(a, b) for a, b in self.pairs if a != b]


def match_dispatches(before: Mapping[str, Any], after: Mapping[str, Any]) -> Matching:
    """Pair ``before``'s dispatch keys with ``after``'s: same key first, then same computation in index order."""
    matching = Matching()
    left = sorted((k for k in before if k not in after), key=natural_order)
    right = sorted((k for k in after if k not in before), key=natural_order)
    matching.pairs.extend((k, k) for k in before if k in after)
    by_name: dict[str, list[str]] = {}
    for key in right:
        by_name.setdefault(computes(key), []).append(key)
    for key in left:
        candidates = by_name.get(computes(key))
        if candidates:
            matching.pairs.append((key, candidates.pop(0)))
        else:
            matching.removed.append(key)
    matching.added = sorted((k for names in by_name.values() for k in names), key=natural_order)
    matching.pairs.sort(key=lambda pair: natural_order(pair[1]))
    return matching


def pair_name(before: str, after: str) -> str:
    """How a matched dispatch is named in messages: one key, or ``old -> new`` when renumbered."""
    return after if before == after else f"{before} -> {after}"
