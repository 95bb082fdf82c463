"""History of each gated metric across toolchain versions, for the report.

Two sources, merged per model x target x metric, keyed by the compiler version line:
- the committed portable baselines' git history (``git log`` of each baseline file): every
  version the team recorded;
- a sweep over released versions (``pytest-rvv sweep``, sweep.py): ``<history>/<version>/results.json``.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from pytest_rvv.comparison.history import release_key
from pytest_rvv.judge.applicable import recorded_toolchain
from pytest_rvv.judge.baselines import baseline_path

HISTORY_DIR = "rvv-history"  # default folder of a sweep's results, in the rootdir


def from_git(root: Path, baselines: Path, target: str, model: str) -> dict[str, dict[str, float]]:
    """{compiler version line: metrics} from the git history of one committed portable baseline."""
    path = baseline_path(baselines, target, model)
    try:
        relative = path.resolve().relative_to(root.resolve())
        log = subprocess.run(["git", "log", "--format=%H", "--", str(relative)], cwd=root, capture_output=True,
                             text=True, timeout=60)
    except (ValueError, OSError, subprocess.TimeoutExpired):
        return {}
    found: dict[str, dict[str, float]] = {}
    for commit in reversed(log.stdout.split()):  # oldest first: a later recording of a version wins
        shown = subprocess.run(["git", "show", f"{commit}:{relative.as_posix()}"], cwd=root, capture_output=True,
                               text=True, timeout=60)
        try:
            data = json.loads(shown.stdout)
        except ValueError:
            continue
        version = recorded_toolchain(data)
        if version and isinstance(data.get("metrics"), dict):
            found[version] = data["metrics"]
    return found


def from_sweep(directory: Path) -> dict[tuple[str, str], dict[str, dict[str, float]]]:
    """{(model, target): {compiler version line: metrics}} from a sweep's per-version results.json files."""
    found: dict[tuple[str, str], dict[str, dict[str, float]]] = {}
    for results in sorted(directory.glob("*/results.json")):
        try:
            document = json.loads(results.read_text())
        except (OSError, ValueError):
            continue
        for record in document.get("metrics", []):
            version = recorded_toolchain(record)
            if version:
                found.setdefault((record["model"], record["target"]), {}).setdefault(version, {})[
                    record["metric"]] = record["value"]
    return found


def history(root: Path, baselines: Path, cells: list[tuple[str, str]], sweep: Path | None) -> dict[
        tuple[str, str], dict[str, Any]]:
    """Per model x target: the versions (oldest release first) and each metric's value per version."""
    swept = from_sweep(sweep) if sweep is not None and sweep.is_dir() else {}
    out = {}
    for model, target in cells:
        series = {**swept.get((model, target), {}), **from_git(root, baselines, target, model)}
        if len(series) < 2:
            continue  # a history needs two versions
        versions = sorted(series, key=release_key)
        metrics = sorted({m for values in series.values() for m in values})
        out[(model, target)] = {"versions": versions,
                                "rows": [(m, [series[v].get(m) for v in versions]) for m in metrics]}
    return out
