"""CI shards: the suite split over N machines (pytest-split's --splits/--group) and the shards' results.json
joined into one (pytest-rvv merge), through real runs of two shards on this machine."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_rvv.errors import ConfigError
from pytest_rvv.report.merge import load_shard, merge

CLI = [sys.executable, "-m", "pytest_rvv.cli"]
ARGS = ("correctness", "--rvv-models=mlp", "--rvv-targets=host,rv64gc,rv64gcv-zvl256b")


def test_two_shards_run_disjoint_halves_and_merge_into_the_whole_run(project, tmp_path):
    project.write()
    whole = project.run(*ARGS, f"--rvv-report={tmp_path / 'whole'}")
    whole.assert_outcomes(passed=6)
    shards = []
    for group in (1, 2):
        shard = project.run(*ARGS, "--splits", "2", "--group", str(group), f"--rvv-report={tmp_path / f's{group}'}")
        assert shard.ret == 0
        shards.append({t["nodeid"] for t in json.loads((tmp_path / f"s{group}" / "results.json").read_text())["tests"]})
    assert shards[0] and shards[1] and not shards[0] & shards[1]
    merged = subprocess.run([*CLI, "merge", str(tmp_path / "s1"), str(tmp_path / "s2"), "--out",
                             str(tmp_path / "merged")], capture_output=True, text=True)
    assert merged.returncode == 0, merged.stderr
    assert merged.stdout.startswith("pytest-rvv merge: 2 shards, 6 tests (6 passed)")
    joined = json.loads((tmp_path / "merged" / "results.json").read_text())
    reference = json.loads((tmp_path / "whole" / "results.json").read_text())
    assert sorted((t["nodeid"], t["outcome"]) for t in joined["tests"]) == \
        sorted((t["nodeid"], t["outcome"]) for t in reference["tests"])
    assert [s["name"] for s in joined["run"]["shards"]] == [str(tmp_path / "s1"), str(tmp_path / "s2")]
    summary = (tmp_path / "merged" / "summary.md").read_text()
    assert "| mlp | passed | passed | passed |" in summary


def test_shards_of_different_toolchains_or_not_results_are_one_line(tmp_path):
    bad = tmp_path / "results.json"
    bad.write_text('{"schema": "something-else"}')
    with pytest.raises(ConfigError, match=r"results.json: schema 'something-else', not pytest-rvv-results/1"):
        load_shard(bad)
    shard = {"schema": "pytest-rvv-results/1", "tests": [], "metrics": []}
    with pytest.raises(ConfigError, match=r"the shards ran different toolchains"):
        merge([shard | {"run": {"toolchain": "3.12.0"}}, shard | {"run": {"toolchain": "3.13.0"}}], ["a", "b"])


def test_the_committed_durations_cover_the_default_suite():
    """pytest-split balances shards by .test_durations beside pyproject.toml (recorded from a cold run with an
    empty cache: pytest suites/ -n auto --store-durations); every test of the default suite has its duration."""
    durations = json.loads((Path(__file__).resolve().parent.parent / ".test_durations").read_text())
    assert len(durations) > 500 and all(isinstance(v, float) for v in durations.values())
    assert all(nodeid.startswith("suites/") for nodeid in durations)
