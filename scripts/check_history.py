"""Check a history's largest change point per cell against the two versions' own results.json, read directly.

    python scripts/check_history.py SWEEP_DIR [SWEEP_DIR...] --changes rvv-history-report/changes.json

For each cell, the change of most added (or removed) work in changes.json names a dispatch and two versions; this
reads that dispatch's rows from ``<dir>/<version>/results.json`` (no pytest-rvv code) and prints both numbers beside
the change's. Exit 1 when one differs. docs/history.md quotes its output.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def rows(folders: list[Path], version: str, model: str, target: str) -> dict[str, dict]:
    for folder in folders:
        path = folder / version / "results.json"
        if not path.is_file():
            continue
        for table in json.loads(path.read_text()).get("dispatch_tables", []):
            if (table["model"], table["target"]) == (model, target):
                return {r["name"]: r for r in table["dispatches"]}
    return {}


def value(row: dict | None, metric: str) -> int | None:
    if row is None:
        return None
    if metric == "per_call":
        return row["executed"] - row["one_time"] if "executed" in row and "one_time" in row else None
    return row.get(metric)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("folders", nargs="+", type=Path)
    parser.add_argument("--changes", type=Path, required=True)
    args = parser.parse_args()
    changes = json.loads(args.changes.read_text())["changes"]
    largest: dict[tuple[str, str], dict] = {}
    for change in changes:
        if change["metric"] not in ("per_call", "executed"):
            continue
        cell = (change["model"], change["target"])
        if cell not in largest or abs(change["added"]) > abs(largest[cell]["added"]):
            largest[cell] = change
    bad = 0
    for (model, target), change in sorted(largest.items()):
        before_name, _, after_name = change["dispatch"].partition(" -> ")
        before = value(rows(args.folders, change["good"], model, target).get(before_name), change["metric"])
        after = value(rows(args.folders, change["bad"], model, target).get(after_name or before_name),
                      change["metric"])
        same = (before, after) == (change["before"], change["after"])
        bad += not same
        print(f"{model} on {target}, {change['good']} -> {change['bad']}, {change['dispatch']}: {change['metric']} "
              f"{change['before']} -> {change['after']} ({change['added']:+d}); results.json: {before} -> {after}: "
              f"{'same' if same else 'DIFFERENT'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
