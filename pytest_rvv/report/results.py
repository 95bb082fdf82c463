"""Results other tools read: a versioned ``results.json`` and, on GitHub Actions, a Markdown step summary.

``results.json`` (schema ``pytest-rvv-results/1``)::

    {"schema": "pytest-rvv-results/1",
     "run": {"command", "date", "toolchain", "reference", "machine", "qemu", "llvm_mca"},
     "tests": [{"nodeid", "outcome", "model", "target", "check"}],
     "metrics": [{"model", "target", "metric", "value", "unit", "kind", "verdict", "baseline",
                  "machine", "toolchain"}],
     "kernels": {"dashboard": [...], "calibration": [...],    # only when the kernel suite ran
                 "comparison": [...]},                         # and was compared (--rvv-compare)
     "estimator": [{"core", "instruction", "sew", "lmul", "measured", "estimated", "error_percent", "source",
                    "llvm_mca"}],                               # when the estimator's tests ran
     "silicon_runs": [{"model", "target", "machine", "core", "estimated_s", "measured_s", "ratio"}],
                                                                # cells judged from a bundle run on a known core
     "cell_estimates": [{"model", "target", "wall": {core: {threads: {"seconds", "bound_by"}}},
                         "caveats": {core: [{"instruction", "measured_at", "sews", "executed", "dispatches",
                                             "share_percent", "reason"}]}}],
                                                                # cells with an est. wall time (Table 1's columns)
                                                                # or an estimate LLVM's model is known to get wrong
     "peers": [{"model", "target", "toolchain", "peer", "peer_name", "iree": {...}, "peer_work": {...}, "ratio",
                "notes"}],                                      # --rvv-peers: IREE beside each peer, per call
     "peers_gap": [{"model", "iree_target", "iree_est_ms", "peer_name", "peer_target", "peer_est_ms", "est_ratio",
                    "work_ratio", ...}],                        # per model, IREE's best path beside the fastest peer
     "peers_published": [{"model", "source", "measured", "iree_ms", "onnxruntime_ms", "measured_ratio", "ours",
                          "differs"}],                          # and a study's measured ratio beside ours
     "dispatch_tables": [{"model", "target", "dispatches": [{"name", "instructions", "vector", "spilled_registers",
                          "executed", "executed_vector", "executed_spills", "one_time", "ukernels"}]}]}
                                                                # every vectorization-checked cell, per dispatch
                                                                # (measure/dispatch_table.py; pytest-rvv history)


``outcome`` is passed, failed, error, could-not-run (no runtime loads the toolchain's modules), skipped,
xfailed or xpassed; ``verdict`` is ok, improved,
changed, REGRESSED, or null when the metric was not judged (no baseline, --update-baselines, or a
diagnostic). The schema file ``results.schema.json`` beside this module states all of it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pytest_rvv.base.store import atomic_write_bytes
from pytest_rvv.comparison.kernels import KernelChange
from pytest_rvv.config.settings import SUMMARY_ENV, environment
from pytest_rvv.config.targets import BUILTIN_TARGETS, Target
from pytest_rvv.judge.peers import gaps
from pytest_rvv.measure.dispatch_table import DispatchTable
from pytest_rvv.measure.metrics import LANE_OCCUPANCY, METRICS, kind_of, metric_info
from pytest_rvv.measure.peers import PeerRow, ordered
from pytest_rvv.measure.performance import PerfResult
from pytest_rvv.report.kernels import KernelEntry, calibration
from pytest_rvv.report.peers import studies

SCHEMA = "pytest-rvv-results/1"
SCHEMA_FILE = Path(__file__).with_name("results.schema.json")  # validate with any JSON Schema 2020-12 validator


def results(run: dict[str, Any], tests: list[dict[str, Any]], perf: dict[tuple[str, str], PerfResult],
            rows: dict[tuple[str, str], list[Any]], targets: dict[str, Target],
            lanes: dict[tuple[str, str], dict[str, Any]] | None = None,
            kernels: list[KernelEntry] | None = None,
            kernel_changes: list[KernelChange] | None = None,
            estimator: list[dict[str, Any]] | None = None,
            peers: list[PeerRow] | None = None,
            dispatch_tables: list[DispatchTable] | None = None) -> dict[str, Any]:
    """The results document: one record per test and one per model x target x metric.

    Lane occupancy (of the executed-vectorization runs of a report) is a diagnostic record, never judged.
    """
    metrics = []
    for (model, target), record in sorted(perf.items()):
        verdicts = {metric: (baseline, status) for metric, baseline, _, status in rows.get((model, target), [])}
        machine = record.board_name or run["machine"]["name"]
        for metric, value in sorted(record.metrics.items()):
            info = metric_info(metric)
            baseline, status = verdicts.get(metric, (None, None))
            metrics.append({"model": model, "target": target, "metric": metric, "value": value,
                            "unit": info.unit if info else "", "kind": kind_of(metric, targets.get(
                                target, BUILTIN_TARGETS["rv64gc"])), "verdict": status, "baseline": baseline,
                            "machine": machine, "toolchain": record.toolchain})
    info = METRICS[LANE_OCCUPANCY]
    for (model, target), record in sorted((lanes or {}).items()):
        metrics.append({"model": model, "target": target, "metric": LANE_OCCUPANCY,
                        "value": record["total"]["occupancy_percent"], "unit": info.unit, "kind": info.kind,
                        "verdict": None, "baseline": None, "machine": run["machine"]["name"],
                        "toolchain": record["toolchain"]})
    document = {"schema": SCHEMA, "run": run, "tests": tests, "metrics": metrics}
    silicon = [{"model": model, "target": target, "machine": record.board_name, **record.calibration.to_json()}
               for (model, target), record in sorted(perf.items()) if record.calibration]
    if silicon:  # runs on silicon (a bundle's results) beside the estimate for that machine's core
        document["silicon_runs"] = silicon
    estimates = [{"model": model, "target": target} | ({"wall": record.wall} if record.wall else {})
                 | ({"caveats": record.caveats} if record.caveats else {})
                 for (model, target), record in sorted(perf.items()) if record.wall or record.caveats]
    if estimates:  # Table 1's est. wall time per thread count and its marks (measure/walltime.py, measure/caveats.py)
        document["cell_estimates"] = estimates
    if kernels or kernel_changes:
        document["kernels"] = {"dashboard": [e.to_json() for e in kernels or []],
                               "calibration": [row.to_json() for row in calibration(kernels or [])]}
    if estimator:  # the silicon estimator against published instruction timings (suites/performance/test_estimator.py)
        document["estimator"] = estimator
    if peers:  # cells beside their peer (--rvv-peers: suites/peers/, report/peers.py)
        document["peers"] = [row.to_json() for row in ordered(peers)]
        document["peers_gap"] = [e.to_json() for e in gaps(peers)]  # per model: IREE's best path, the fastest peer
        if published := studies(peers):  # the studies' measured ratios beside ours (report/peers.py PUBLISHED)
            document["peers_published"] = [e.to_json() for e in published]
    if dispatch_tables:  # per dispatch, what the history over toolchain versions draws (report/history.py)
        document["dispatch_tables"] = [t.to_json() for t in sorted(dispatch_tables, key=lambda t: (t.model, t.target))]
    if kernel_changes:  # a toolchain comparison over the kernel suite: each cell's call, before and after
        document["kernels"]["comparison"] = [c.to_json() for c in kernel_changes]
    return document


def schema() -> dict[str, Any]:
    """The JSON Schema of ``results.json`` (``results.schema.json``, shipped with the package)."""
    return json.loads(SCHEMA_FILE.read_text())


def write_results(directory: Path, document: dict[str, Any]) -> Path:
    path = directory / "results.json"
    atomic_write_bytes(path, (json.dumps(document, indent=1, default=str) + "\n").encode())
    return path


def step_summary(grid: list[list[str]], failures: list[tuple[str, str]]) -> str:
    """The verdict grid and the failures as GitHub-flavoured Markdown."""
    lines = ["## pytest-rvv", ""]
    if grid:
        lines += ["| " + " | ".join(grid[0]) + " |", "|" + "---|" * len(grid[0])]
        lines += ["| " + " | ".join(row) + " |" for row in grid[1:]]
    if failures:
        lines += ["", f"### {len(failures)} failed", ""]
        lines += [f"- `{nodeid}`: {first}" for nodeid, first in failures]
    return "\n".join(lines) + "\n"


def append_step_summary(text: str) -> Path | None:
    """Append ``text`` to ``$GITHUB_STEP_SUMMARY`` when it is set (GitHub Actions)."""
    target = environment(SUMMARY_ENV)
    if not target:
        return None
    with open(target, "a", encoding="utf-8") as f:
        f.write(text)
    return Path(target)
