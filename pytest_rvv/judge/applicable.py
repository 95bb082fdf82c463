"""Which baseline applies to a measurement: the committed portable one, and this machine's own.

Portable metrics (see metrics.py) are compared with ``baselines/performance/<target>/<model>.json``
on every machine. Machine-bound metrics are compared only with
``baselines/performance/machines/<machine>/<target>/<model>.json`` of the machine this run is on;
without one they are shown as information, with one line saying where the existing ones come
from and how to record one here.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_rvv.base.errors import ConfigError
from pytest_rvv.config.machine import Machine
from pytest_rvv.judge.baselines import Baseline, baseline_path, load_baseline

MACHINES = "machines"
RECORD_HINT = "pytest suites/performance --update-baselines"


def machine_baseline_path(root: Path, machine: str, target: str, model: str) -> Path:
    return baseline_path(root / MACHINES / machine, target, model)


@dataclass(frozen=True)
class ApplicableBaselines:
    """The baselines that apply to one model x target on one machine (None: none recorded)."""

    portable: Baseline | None
    portable_path: Path
    machine: Baseline | None
    machine_path: Path
    other_machines: tuple[str, ...]  # machines that have a baseline for this model x target

    def machine_note(self, machine: Machine, record: str = RECORD_HINT) -> str:
        """One line when machine-bound metrics are not gated here (``record``: the command that records them);
        empty when they are."""
        if self.machine is not None:
            recorded = self.machine.machine_id
            if recorded and recorded != machine.id:
                return (f"note: {self.machine_path} was recorded under the name {machine.name} on a machine with "
                        f"another fingerprint ({recorded}, now {machine.id}); times are gated against it")
            return ""
        elsewhere = f"baselines exist for {', '.join(self.other_machines)}" if self.other_machines else "none recorded"
        return (f"machine-bound metrics shown, not gated: no baseline from machine {machine.name} ({elsewhere}); "
                f"record one here with {record}")


def applicable_baselines(root: Path, machine: Machine, target: str, model: str) -> ApplicableBaselines:
    """Load both baselines (a damaged file is a ConfigError naming it)."""
    portable_path = baseline_path(root, target, model)
    machine_path = machine_baseline_path(root, machine.name, target, model)
    others = tuple(sorted(p.parent.parent.name for p in (root / MACHINES).glob(f"*/{target}/{model}.json")
                          if p.parent.parent.name != machine.name))
    return ApplicableBaselines(load_baseline(portable_path), portable_path, load_baseline(machine_path), machine_path,
                               others)


def recorded_toolchain(baseline: dict[str, Any] | None) -> str | None:
    """The compiler version line a stored document (an old baseline from git, a results.json metric) was recorded
    with; ``Baseline.compiler`` of a loaded baseline."""
    toolchain = (baseline or {}).get("toolchain")
    return toolchain.get("iree_compile") if isinstance(toolchain, dict) else None


def recorded_toolchains(root: Path) -> set[str]:
    """The compiler version lines the committed portable baselines were recorded with."""
    found = set()
    for path in root.glob("*/*.json"):
        try:
            baseline = load_baseline(path)
        except ConfigError:
            continue
        line = baseline.compiler if baseline is not None else None
        if line:
            found.add(line)
    return found
