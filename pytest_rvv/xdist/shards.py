"""CI shards by cell: every test of one model x target lands on the same machine.

A cell (model x target, or ONNX node test x target) is compiled once and emulated once per content,
and every suite (agreement, compile, vectorization, performance) reads the same cache entries. A
split by test (pytest-split's ``--splits``) scatters a cell's tests over the shards, so each machine
compiles almost every cell again: measured on the default suite with 3 splits, all 168 model x
target cells landed on two or three shards. ``--rvv-shard=K/N`` keeps cells whole and balances
them by the durations pytest-split records (``--store-durations`` into ``.test_durations``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import pytest

from pytest_rvv.base.errors import ConfigError

DURATIONS_FILE = ".test_durations"


def cell_of(item: pytest.Item) -> str:
    """The cell a test belongs to: its model (or node test) and target, else the test itself."""
    callspec = getattr(item, "callspec", None)
    params = callspec.params if callspec is not None else {}
    subject = params.get("rvv_model", params.get("rvv_node_test"))
    target = params.get("rvv_target")
    if subject is None and target is None:
        return item.nodeid
    parts = [getattr(value, "name", str(value)) for value in (subject, target) if value is not None]
    return "|".join(parts)


def cell_of_nodeid(nodeid: str, targets: Iterable[str]) -> str:
    """``cell_of`` from a test id alone (xdist's controller schedules ids, not items): ``...[model-target]`` is
    ``model|target`` for a known target name, ``...[target]`` is ``target``; anything else is the test itself."""
    _, bracket, params = nodeid.partition("[")
    if not bracket or not params.endswith("]"):
        return nodeid
    params = params[:-1]
    for target in sorted(targets, key=len, reverse=True):
        if params == target:
            return target
        if params.endswith(f"-{target}") and len(params) > len(target) + 1:
            return f"{params[:-len(target) - 1]}|{target}"
    return nodeid


def cell_weights(tests: Iterable[tuple[str, str]], durations: Mapping[str, float]) -> dict[str, float]:
    """Each cell's recorded seconds, from (test id, cell) pairs; a test without a recorded duration weighs the mean
    of the recorded tests among them (1 s when none is)."""
    pairs = list(tests)
    known = [durations[nodeid] for nodeid, _ in pairs if nodeid in durations]
    default = sum(known) / len(known) if known else 1.0
    weights: dict[str, float] = {}
    for nodeid, cell in pairs:
        weights[cell] = weights.get(cell, 0.0) + durations.get(nodeid, default)
    return weights


def load_durations(path: Path) -> dict[str, float]:
    """Recorded seconds per test id; none when the file is absent (every cell then weighs the same)."""
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: not a durations file ({exc}); re-record it with "
                          "pytest suites/ -n auto --store-durations, or delete it") from None
    if not isinstance(data, dict) or not all(isinstance(v, int | float) for v in data.values()):
        raise ConfigError(f"{path}: not a JSON object of test id -> seconds; re-record it with "
                          "pytest suites/ -n auto --store-durations, or delete it")
    return {str(k): float(v) for k, v in data.items()}


def header(shard: tuple[int, int], durations: Path, recorded: Mapping[str, float]) -> str:
    """The terminal's line for a shard: which one, and what balanced it (``recorded``: ``durations``' contents)."""
    balance = (f"balanced by {durations} ({len(recorded)} tests recorded; an unrecorded test weighs their mean)"
               if recorded else f"no {durations}: every test weighs the same")
    return f"rvv: shard {shard[0]}/{shard[1]}: whole model x target cells, {balance}"


def assign(weights: Mapping[str, float], shards: int) -> dict[str, int]:
    """Cells to shards 1..N, heaviest first onto the lightest shard (ties by name: the same on every machine)."""
    loads = [0.0] * shards
    placed: dict[str, int] = {}
    for cell in sorted(weights, key=lambda c: (-weights[c], c)):
        lightest = min(range(shards), key=lambda s: (loads[s], s))
        placed[cell] = lightest + 1
        loads[lightest] += weights[cell]
    return placed


def select(items: Sequence[pytest.Item], shard: tuple[int, int],
           durations: Mapping[str, float]) -> tuple[list[pytest.Item], list[pytest.Item]]:
    """(kept, deselected) for shard K of N. A test without a recorded duration weighs the mean of those with one."""
    cells = [cell_of(item) for item in items]
    weights = cell_weights(((item.nodeid, cell) for item, cell in zip(items, cells, strict=True)), durations)
    placed = assign(weights, shard[1])
    here = [placed[cell] == shard[0] for cell in cells]
    return ([i for i, h in zip(items, here, strict=True) if h],
            [i for i, h in zip(items, here, strict=True) if not h])
