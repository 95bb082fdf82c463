"""Performance baselines: one readable JSON file per model x target under ``baselines/performance/``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pytest_rvv.errors import ConfigError
from pytest_rvv.store import atomic_write_bytes


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


def write_baselines(root: Path, records: list[dict[str, Any]]) -> list[str]:
    """Write each record atomically (a crash leaves every file old or new, never half-written).

    Returns one summary line per file: recorded, updated (with the metrics that changed) or unchanged.
    """
    summary = []
    for record in sorted(records, key=lambda r: (r["target"], r["model"])):
        path = baseline_path(root, record["target"], record["model"])
        old = load_baseline(path) if path.exists() else None
        toolchain = record["toolchain"]
        data = {"model": record["model"], "target": record["target"], "toolchain": toolchain,
                "metrics": record["metrics"], "samples": record["samples"]}
        if old is not None and old.get("metrics") == data["metrics"] and old.get("toolchain") == toolchain:
            summary.append(f"unchanged {path}")
            continue
        atomic_write_bytes(path, (json.dumps(data, indent=1, sort_keys=True) + "\n").encode())
        if old is None:
            summary.append(f"recorded  {path}")
        else:
            changed = sorted(k for k in data["metrics"] if old["metrics"].get(k) != data["metrics"][k])
            summary.append(f"updated   {path}: {', '.join(changed) or 'toolchain'}")
    return summary
