"""Performance baselines: readable JSON files per model x target under ``baselines/performance/``:
``<target>/<model>.json`` (portable metrics, committed, gated everywhere) and
``machines/<machine>/<target>/<model>.json`` (machine-bound metrics of that machine)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from pytest_rvv.base.errors import ConfigError
from pytest_rvv.base.store import atomic_write_bytes

PERF_BASELINES = Path("baselines") / "performance"  # relative to the project's root


def baseline_path(root: Path, target: str, model: str) -> Path:
    return root / target / f"{model}.json"


def load_baseline(path: Path) -> dict[str, Any] | None:
    """The stored baseline, None when there is none; a damaged file is one clear error."""
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: unreadable baseline ({exc}); restore it from git or rerun with "
                          "--update-baselines") from exc
    if not isinstance(data, dict) or not isinstance(data.get("metrics"), dict):
        raise ConfigError(f"{path}: not a pytest-rvv baseline (no metrics); restore it from git or rerun with "
                          "--update-baselines")
    return data


def _write(path: Path, data: dict[str, Any], compare_keys: tuple[str, ...]) -> str:
    """Write ``data`` atomically unless the stored file has the same ``compare_keys``; one summary line."""
    old = load_baseline(path) if path.exists() else None
    if old is not None and all(old.get(k) == data.get(k) for k in compare_keys):
        return f"unchanged {path}"
    atomic_write_bytes(path, (json.dumps(data, indent=1, sort_keys=True) + "\n").encode())
    if old is None:
        return f"recorded  {path}"
    changed = sorted(k for k in data["metrics"] if old["metrics"].get(k) != data["metrics"][k])
    return f"updated   {path}: {', '.join(changed) or 'toolchain'}"


def _steady(old: dict[str, Any] | None, new: dict[str, float], ratios: Mapping[str, float]) -> dict[str, float]:
    """``new`` with the old value kept for each ratio-gated metric that stayed within its ratio
    (noise is not a change: re-recording elsewhere leaves the file byte-identical)."""
    before = (old or {}).get("metrics", {})
    kept = dict(new)
    for metric, ratio in ratios.items():
        noisy = metric in kept and metric in before and before[metric] and 1 < ratio < float("inf")
        if noisy and before[metric] / ratio <= kept[metric] <= before[metric] * ratio:
            kept[metric] = before[metric]
    return kept


def write_baselines(root: Path, records: list[dict[str, Any]], machine: dict[str, Any],
                    split: Callable[[str, dict[str, float]], dict[str, dict[str, float]]],
                    ratios: Mapping[str, float] | None = None) -> list[str]:
    """Write each record's portable metrics to ``<target>/<model>.json`` and its machine-bound ones to
    ``machines/<machine>/<target>/<model>.json``, atomically (old or new, never half-written).

    ``split(target, metrics)`` says which is which (metrics.split); ``ratios`` are the ratio allowances of noisy
    portable metrics (peak RSS). A portable file whose metrics and toolchain are unchanged (ratio
    metrics within their allowance) is left byte-identical, whichever machine re-records it.
    Returns one line per file.
    """
    summary = []
    for record in sorted(records, key=lambda r: (r["target"], r["model"])):
        target, model, toolchain = record["target"], record["model"], record["toolchain"]
        parts = split(target, record["metrics"])
        portable, bound = parts["portable"], parts["machine-bound"]
        if portable and not record.get("board"):  # a board's portable metrics are the emulated runs' own
            path = baseline_path(root, target, model)
            old = load_baseline(path) if path.exists() else None
            data = {"model": model, "target": target, "toolchain": toolchain,
                    "metrics": _steady(old, portable, ratios or {}), "recorded_on": machine["name"]}
            if record.get("silicon"):  # estimated cycles per dispatch: the dispatch-level diff of a failing estimate
                data["silicon"] = record["silicon"]
            summary.append(_write(path, data, ("metrics", "toolchain", "silicon")))
        if bound:
            where = record.get("board") or machine  # a board is a machine of its own
            data = {"model": model, "target": target, "toolchain": toolchain, "metrics": bound,
                    "samples": record["samples"], "machine": where}
            path = baseline_path(root / "machines" / where["name"], target, model)
            summary.append(_write(path, data, ("metrics", "toolchain", "samples", "machine")))
    return summary
