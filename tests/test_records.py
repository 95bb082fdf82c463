"""The typed records keep their files' schema: every committed baseline loads as a Baseline and writes back the same,
and a performance result crosses to the reports (and results.json) unchanged."""

import json
from pathlib import Path

import pytest

from pytest_rvv.judge.baselines import PERF_BASELINES, Baseline, load_baseline
from pytest_rvv.measure.performance import CalibrationPoint, PerfResult

ROOT = Path(__file__).resolve().parent.parent
COMMITTED = sorted((ROOT / PERF_BASELINES).rglob("*.json"))


def test_the_baselines_are_committed():
    assert len(COMMITTED) > 300  # the kernel and model cells' portable baselines


@pytest.mark.parametrize("path", COMMITTED, ids=lambda p: p.relative_to(ROOT / PERF_BASELINES).as_posix())
def test_every_committed_baseline_loads_and_writes_back_the_same(path):
    stored = json.loads(path.read_text())
    baseline = load_baseline(path)
    assert isinstance(baseline, Baseline)
    assert baseline.to_json() == stored  # every key read, none added: a schema change fails here
    assert Baseline.from_json(baseline.to_json()) == baseline
    assert (baseline.model, baseline.target) == (path.stem, path.parent.name)
    assert baseline.compiler == stored["toolchain"]["iree_compile"]
    assert json.dumps(baseline.to_json(), indent=1, sort_keys=True) + "\n" == path.read_text()  # byte for byte


def test_a_machine_baseline_keeps_its_samples_and_machine():
    data = {"model": "mlp", "target": "host", "toolchain": {"iree_compile": "IREE compiler version 3.13.0"},
            "metrics": {"wall_s_min": 0.5}, "samples": {"wall_s": [0.5, 0.6]},
            "machine": {"name": "box", "id": "abc123", "fingerprint": {"cores": 2}}}
    baseline = Baseline.from_json(data)
    assert baseline.samples == {"wall_s": [0.5, 0.6]} and baseline.machine_id == "abc123"
    assert baseline.recorded_on is None and baseline.silicon is None
    assert baseline.to_json() == data


def test_a_performance_result_crosses_to_the_reports_unchanged():
    result = PerfResult("mlp", "rv64gcv-zvl256b", {"iree_compile": "IREE compiler version 3.13.0"},
                        {"wall_s_min": 0.2, "est_cycles@spacemit-x60": 1000}, {"wall_s": [0.2, 0.3]},
                        silicon={"spacemit-x60": {"dispatch_0": 1000}}, watched={"dispatch_0": {"vsetvl": 4}},
                        one_time={"dispatch_0": 7}, silicon_one_time={"spacemit-x60": 100},
                        board={"name": "k1"}, calibration=CalibrationPoint("spacemit-x60", 0.1, 0.2, 0.5))
    data = result.to_json()
    assert json.loads(json.dumps(data)) == data  # plain data: it crosses xdist and is written as JSON
    assert PerfResult.from_json(data) == result
    assert data["calibration"] == {"core": "spacemit-x60", "estimated_s": 0.1, "measured_s": 0.2, "ratio": 0.5,
                                   "threads": 1, "error_percent": -50.0}
    walled = CalibrationPoint("spacemit-x60", 0.1, 0.2, 0.5, 1, 0.25, "DRAM")  # with the est. wall time at 1 thread
    assert CalibrationPoint.from_json(walled.to_json()) == walled
    assert walled.to_json() == data["calibration"] | {"wall_s": 0.25, "bound_by": "DRAM", "wall_ratio": 1.25,
                                                      "wall_error_percent": 25.0}
    assert result.per_call_cycles("spacemit-x60") == 900 and result.board_name == "k1"


def test_a_result_leaves_out_what_it_did_not_measure():
    result = PerfResult("mlp", "host", {"iree_compile": "x"}, {"module_bytes": 1})
    assert result.to_json() == {"model": "mlp", "target": "host", "toolchain": {"iree_compile": "x"},
                                "metrics": {"module_bytes": 1}, "samples": {}}
    assert PerfResult.from_json(result.to_json()) == result
    assert result.per_call_cycles("spacemit-x60") is None and result.board_name is None
