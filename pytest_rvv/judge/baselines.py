"""Performance baselines: readable JSON files per model x target under ``baselines/performance/``:
``<target>/<model>.json`` (portable metrics, committed, gated everywhere) and
``machines/<machine>/<target>/<model>.json`` (machine-bound metrics of that machine)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_rvv.base.errors import ConfigError
from pytest_rvv.base.store import atomic_write_bytes
from pytest_rvv.config.cores import cache_hierarchy
from pytest_rvv.judge.gate import within_noise
from pytest_rvv.measure.metrics import MACHINE_BOUND, PORTABLE
from pytest_rvv.measure.performance import PerfResult

PERF_BASELINES = Path("baselines") / "performance"  # relative to the project's root


def baseline_path(root: Path, target: str, model: str) -> Path:
    return root / target / f"{model}.json"


@dataclass(frozen=True)
class Baseline:
    """A stored measurement of one model x target: a file under ``baselines/performance/``.

    ``to_json`` / ``from_json`` are its one (de)serialiser; the optional fields are None where the file has no such
    key: a portable baseline has ``recorded_on`` (``silicon`` when estimated, ``traffic`` when its memory traffic was
    modelled), a machine's has ``samples`` and ``machine``.
    """

    model: str
    target: str
    toolchain: dict[str, str]
    metrics: dict[str, float]
    recorded_on: str | None = None  # portable: the name of the machine that recorded it
    silicon: dict[str, dict[str, int]] | None = None  # portable: core -> estimated cycles per dispatch
    traffic: dict[str, dict[str, int]] | None = None  # portable: core -> DRAM bytes per dispatch of one call
    samples: dict[str, list[float]] | None = None  # machine-bound: every timed run
    machine: dict[str, Any] | None = None  # machine-bound: the machine (config/machine.py Machine.as_json)

    @property
    def compiler(self) -> str | None:
        """The compiler version line it was recorded with."""
        return self.toolchain.get("iree_compile")

    @property
    def machine_id(self) -> str | None:
        """The fingerprint id of the machine a machine-bound baseline was recorded on."""
        return (self.machine or {}).get("id")

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"model": self.model, "target": self.target, "toolchain": self.toolchain,
                                "metrics": self.metrics}
        optional = {"recorded_on": self.recorded_on, "silicon": self.silicon, "traffic": self.traffic,
                    "samples": self.samples, "machine": self.machine}
        return data | {key: value for key, value in optional.items() if value is not None}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Baseline:
        toolchain = data.get("toolchain")
        return cls(data.get("model", ""), data.get("target", ""), toolchain if isinstance(toolchain, dict) else {},
                   data["metrics"], recorded_on=data.get("recorded_on"), silicon=data.get("silicon"),
                   traffic=data.get("traffic"), samples=data.get("samples"), machine=data.get("machine"))


def load_baseline(path: Path) -> Baseline | None:
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
    return Baseline.from_json(data)


def _write(path: Path, new: Baseline, compared: Callable[[Baseline], tuple[Any, ...]]) -> str:
    """Write ``new`` atomically unless the stored file has the same ``compared`` fields; one summary line."""
    old = load_baseline(path) if path.exists() else None
    if old is not None and compared(old) == compared(new):
        return f"unchanged {path}"
    atomic_write_bytes(path, (json.dumps(new.to_json(), indent=1, sort_keys=True) + "\n").encode())
    if old is None:
        return f"recorded  {path}"
    changed = sorted(k for k in new.metrics if old.metrics.get(k) != new.metrics[k])
    changed += [name for name in ("silicon", "traffic") if getattr(old, name) != getattr(new, name)]
    return f"updated   {path}: {', '.join(changed) or 'toolchain'}"


def _steady(old: Baseline | None, new: dict[str, float], ratios: Mapping[str, float]) -> dict[str, float]:
    """``new`` with the old value kept for each ratio-gated metric that stayed within its ratio
    (noise is not a change: re-recording elsewhere leaves the file byte-identical)."""
    before = old.metrics if old is not None else {}
    kept = dict(new)
    for metric, ratio in ratios.items():
        noisy = metric in kept and metric in before and before[metric] and 1 < ratio < float("inf")
        if noisy and before[metric] / ratio <= kept[metric] <= before[metric] * ratio:
            kept[metric] = before[metric]
    return kept


def _steady_traffic(old: Baseline | None, record: PerfResult) -> dict[str, dict[str, int]] | None:
    """The record's DRAM bytes per dispatch and core, with the old value kept for each dispatch that moved within the
    cache model's noise (judge/gate.py): re-recording elsewhere leaves the file byte-identical."""
    before = (old.traffic or {}) if old is not None else {}
    kept = {}
    for core in record.traffic:
        stored = before.get(core, {})
        line = cache_hierarchy(core).l1d.line
        kept[core] = {name: stored[name] if name in stored and within_noise(stored[name], now, line) else now
                      for name, now in record.dram_per_dispatch(core).items()}
    return kept or None


def _portable_fields(baseline: Baseline) -> tuple[Any, ...]:
    return baseline.metrics, baseline.toolchain, baseline.silicon, baseline.traffic


def _machine_fields(baseline: Baseline) -> tuple[Any, ...]:
    return baseline.metrics, baseline.toolchain, baseline.samples, baseline.machine


def write_baselines(root: Path, records: list[PerfResult], machine: dict[str, Any],
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
    for record in sorted(records, key=lambda r: (r.target, r.model)):
        target, model, toolchain = record.target, record.model, record.toolchain
        parts = split(target, record.metrics)
        portable, bound = parts[PORTABLE], parts[MACHINE_BOUND]
        if portable and not record.board:  # a board's portable metrics are the emulated runs' own
            path = baseline_path(root, target, model)
            old = load_baseline(path) if path.exists() else None
            # estimated cycles per dispatch: the dispatch-level diff of a failing estimate
            summary.append(_write(path, Baseline(model, target, toolchain, _steady(old, portable, ratios or {}),
                                                 recorded_on=machine["name"], silicon=record.silicon or None,
                                                 traffic=_steady_traffic(old, record)),
                                  _portable_fields))
        if bound:
            where = record.board or machine  # a board is a machine of its own
            path = baseline_path(root / "machines" / where["name"], target, model)
            summary.append(_write(path, Baseline(model, target, toolchain, bound, samples=record.samples,
                                                 machine=where), _machine_fields))
    return summary
