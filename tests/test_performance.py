"""Performance baselines: recording, checking with a table, atomic updates, merging xdist workers."""

import json
import shutil

import pytest

from pytest_rvv.perf.baseline import load_baseline, write_baselines
from pytest_rvv.perf.policy import DEFAULT_TOLERANCES, Row, compare, mann_whitney_greater, table, tolerances

from .conftest import SUITES

ARGS = ("performance", "--rvv-models=mlp", "--rvv-targets=host,aarch64,rv64gc")


def performance_project(project):
    project.write(suite=False)
    shutil.copytree(SUITES / "performance", project.path / "performance", ignore=shutil.ignore_patterns("__pycache__"))
    return project


def baselines(project):
    return {p.relative_to(project.path).as_posix(): json.loads(p.read_text())
            for p in sorted((project.path / "baselines" / "performance").rglob("*.json"))}


def test_workers_hand_results_to_the_controller_which_writes_each_baseline_once(project):
    performance_project(project)
    result = project.run(*ARGS, "-n", "2", "--update-baselines")
    result.assert_outcomes(passed=3)
    written = baselines(project)
    assert sorted(written) == ["baselines/performance/aarch64/mlp.json", "baselines/performance/host/mlp.json",
                               "baselines/performance/rv64gc/mlp.json"]
    assert result.stdout.str().count("recorded  ") == 3
    host, rv = written["baselines/performance/host/mlp.json"], written["baselines/performance/rv64gc/mlp.json"]
    assert {"wall_s_min", "cpu_s_min", "peak_rss_kb", "iree_peak_bytes", "module_bytes"} <= set(host["metrics"])
    assert "wall_s_min" not in rv["metrics"] and rv["metrics"]["static_vector"] == 0  # compile side only
    assert "executed_dispatch_instructions" in written["baselines/performance/aarch64/mlp.json"]["metrics"]
    assert host["toolchain"]["iree_compile"].startswith("IREE compiler version")
    result.stdout.fnmatch_lines(["| Model | Target | Time (min s) | Mem (peak RSS MB) | static vector instr "
                                 "| executed vector % | speedup vs rv64gc |"])


def test_an_edited_baseline_fails_the_right_test_with_a_table(project):
    performance_project(project)
    project.run(*ARGS, "--update-baselines").assert_outcomes(passed=3)
    path = project.path / "baselines" / "performance" / "aarch64" / "mlp.json"
    data = json.loads(path.read_text())
    data["metrics"]["module_bytes"] -= 100
    path.write_text(json.dumps(data))
    result = project.run(*ARGS)
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines([
        "FAILED performance/test_performance.py::test_no_slower_or_bigger[[]mlp-aarch64[]]*",
    ])
    result.stdout.fnmatch_lines([
        "performance regression: mlp on aarch64 (baseline */baselines/performance/aarch64/mlp.json)",
        "metric * baseline * now * change * allowed  verdict",
        "module_bytes * +* exact  REGRESSED",
    ])


def test_missing_baseline_passes_unless_strict(project):
    performance_project(project)
    note = project.run("performance", "--rvv-models=mlp", "--rvv-targets=rv64gc")
    note.assert_outcomes(passed=1)
    note.stdout.fnmatch_lines(["baseline needed: */rv64gc/mlp.json (record it with --update-baselines)"])
    strict = project.run("performance", "--rvv-models=mlp", "--rvv-targets=rv64gc", "--rvv-strict-baselines")
    strict.assert_outcomes(failed=1)
    strict.stdout.fnmatch_lines(["no performance baseline */rv64gc/mlp.json: record one with --update-baselines"])


def test_an_interrupted_update_leaves_the_old_baselines_intact(tmp_path, monkeypatch):
    record = {"model": "m", "target": "host", "toolchain": {"iree_compile": "x"}, "metrics": {"module_bytes": 1},
              "samples": {}}
    write_baselines(tmp_path, [record])
    before = (tmp_path / "host" / "m.json").read_bytes()

    def crash(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr("os.replace", crash)
    with pytest.raises(KeyboardInterrupt):
        write_baselines(tmp_path, [{**record, "metrics": {"module_bytes": 2}}])
    assert (tmp_path / "host" / "m.json").read_bytes() == before
    assert [p.name for p in (tmp_path / "host").iterdir()] == ["m.json"]  # no half-written temporary left


def test_a_damaged_baseline_is_one_clear_line(tmp_path):
    path = tmp_path / "m.json"
    path.write_text("{ not json")
    with pytest.raises(Exception, match=r"m.json: unreadable baseline .*restore it from git or rerun with"):
        load_baseline(path)


def test_deterministic_metrics_are_exact_and_time_is_a_ratio():
    limits = tolerances({}, under_xdist=False)
    rows = compare({"metrics": {"module_bytes": 100, "wall_s_min": 1.0}},
                   {"module_bytes": 101, "wall_s_min": 1.2}, {}, limits)
    assert [(r.metric, r.ok) for r in rows] == [("module_bytes", False), ("wall_s_min", True)]
    assert "module_bytes" in table(rows) and "REGRESSED" in table(rows)
    assert tolerances({}, under_xdist=True)["wall_s_min"] > DEFAULT_TOLERANCES["wall_s_min"]


def test_slower_beyond_the_ratio_but_not_significantly_is_not_a_regression():
    base = {"metrics": {"wall_s_min": 1.0}, "samples": {"wall_s": [1.0, 3.0, 3.1, 2.9, 3.2]}}
    now = [1.5, 1.2, 3.0, 2.8, 3.1]
    [row] = compare(base, {"wall_s_min": 1.0 * 1.3 + 0.1}, {"wall_s": now}, {"wall_s_min": 1.3})
    assert row.ok and row.note.startswith("p=")


def test_mann_whitney_detects_a_real_shift():
    assert mann_whitney_greater([2.0, 2.1, 2.2, 2.3, 2.4], [1.0, 1.1, 1.2, 1.3, 1.4]) < 0.01
    assert mann_whitney_greater([1.0, 1.1, 1.2, 1.3, 1.4], [1.0, 1.1, 1.2, 1.3, 1.4]) == pytest.approx(0.5, abs=0.1)


def test_bad_tolerance_names_the_metric():
    with pytest.raises(Exception, match=r"\[tool.pytest_rvv.tolerances\] wall_time: unknown metric"):
        tolerances({"wall_time": 2}, under_xdist=False)
    assert Row("x", 1, 2, 0.0, False).allowance() == "exact"


def test_tiny_slowdowns_below_the_noise_floor_pass_and_large_ones_fail():
    limits = {"wall_s_min": 1.3}
    assert compare({"metrics": {"wall_s_min": 0.014}}, {"wall_s_min": 0.019}, {}, limits)[0].ok
    assert not compare({"metrics": {"wall_s_min": 1.0}}, {"wall_s_min": 1.5}, {}, limits)[0].ok
