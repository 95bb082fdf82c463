"""CI shards: the suite split over N machines by cell (--rvv-shard=K/N: every test of one model x target on one
machine, balanced by .test_durations) and the shards' results.json joined into one (pytest-rvv merge), through
real runs of two shards on this machine."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_rvv.base.errors import ConfigError
from pytest_rvv.config.settings import parse_shard
from pytest_rvv.report.merge import load_shard, merge
from pytest_rvv.xdist.shards import assign, header, load_durations, select

CLI = [sys.executable, "-m", "pytest_rvv.cli"]
ARGS = ("correctness", "--rvv-models=mlp", "--rvv-targets=host,rv64gc,rv64gcv-zvl256b")


def test_two_shards_run_disjoint_halves_and_merge_into_the_whole_run(project, tmp_path):
    project.write()
    whole = project.run(*ARGS, f"--rvv-report={tmp_path / 'whole'}")
    whole.assert_outcomes(passed=6)
    shards = []
    for group in (1, 2):
        shard = project.run(*ARGS, f"--rvv-shard={group}/2", f"--rvv-report={tmp_path / f's{group}'}")
        assert shard.ret == 0
        shard.stdout.fnmatch_lines([f"rvv: shard {group}/2: whole model x target cells, no */.test_durations: "
                                    "every test weighs the same"])
        shards.append({t["nodeid"] for t in json.loads((tmp_path / f"s{group}" / "results.json").read_text())["tests"]})
    assert shards[0] and shards[1] and not shards[0] & shards[1]
    cells = [{nodeid.rsplit("[", 1)[1] for nodeid in shard} for shard in shards]
    assert not cells[0] & cells[1], "a model x target cell's compile and agreement tests ran on two shards"
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


class _Test:
    """A collected test as the shard split sees it: its id and its model/target parameters."""

    def __init__(self, model: str, target: str, check: str) -> None:
        self.nodeid = f"suites/{check}.py::test[{model}-{target}]"
        self.callspec = type("CallSpec", (), {"params": {"rvv_model": model, "rvv_target": target}})()


def test_cells_stay_whole_and_heaviest_go_first_to_the_lightest_shard():
    items = [_Test(m, t, c) for m in ("big", "small", "tiny") for t in ("rv64gc", "rv64gcv") for c in ("a", "b")]
    durations = {i.nodeid: {"big": 40.0, "small": 10.0, "tiny": 1.0}[i.nodeid.split("[")[1].split("-")[0]]
                 for i in items}
    kept = [select(items, (k, 2), durations)[0] for k in (1, 2)]
    assert sorted(i.nodeid for i in kept[0] + kept[1]) == sorted(i.nodeid for i in items)
    assert [sorted({i.nodeid.split("[")[1] for i in shard}) for shard in kept] == [
        ["big-rv64gc]", "small-rv64gc]", "tiny-rv64gc]"], ["big-rv64gcv]", "small-rv64gcv]", "tiny-rv64gcv]"]]
    assert assign({"a": 5.0, "b": 3.0, "c": 3.0, "d": 1.0}, 2) == {"a": 1, "b": 2, "c": 2, "d": 1}
    unknown = select(items, (1, 2), {})[0]  # no durations recorded: every cell weighs the same
    assert len(unknown) == len(items) // 2


def test_a_bad_shard_or_durations_file_is_one_line(tmp_path):
    assert parse_shard("2/4") == (2, 4)
    for bad in ("0/2", "3/2", "2", "a/b"):
        with pytest.raises(ConfigError, match=r"^--rvv-shard: .* is not K/N with 1 <= K <= N"):
            parse_shard(bad)
    durations = tmp_path / ".test_durations"
    durations.write_text("{not json")
    with pytest.raises(ConfigError, match=r"\.test_durations: not a durations file .*--store-durations"):
        load_durations(durations)
    assert load_durations(tmp_path / "absent") == {}


def test_a_damaged_durations_file_stops_a_sharded_run_in_one_line(project):
    project.write()
    (project.path / ".test_durations").write_text("{not json")
    result = project.run(*ARGS, "--rvv-shard=1/2")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: */.test_durations: not a durations file (*); re-record it with pytest "
                                 "suites/ -n auto --store-durations, or delete it"])
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    project.run(*ARGS, "--co").assert_outcomes()  # unsharded runs do not read it


def test_the_committed_durations_cover_the_default_suite():
    """--rvv-shard balances shards by .test_durations beside pyproject.toml (pytest-split's format, recorded from a
    cold run with an empty cache: pytest suites/ -n auto --store-durations); every test of the default suite has
    its duration, so adding a model or a target without re-recording fails here, not as a lopsided CI."""
    root = Path(__file__).resolve().parent.parent
    durations = load_durations(root / ".test_durations")
    collect = [sys.executable, "-m", "pytest", "suites/", "--collect-only", "-q", "-p", "no:cacheprovider"]
    collected = subprocess.run(collect, cwd=root, capture_output=True, text=True)
    assert collected.returncode == 0, collected.stdout[-2000:]
    nodeids = {line.strip() for line in collected.stdout.splitlines() if "::" in line}
    assert len(nodeids) > 500
    missing = sorted(nodeids - set(durations))
    assert not missing, (f"{len(missing)} tests of the default suite have no recorded duration (e.g. {missing[0]}): "
                         "re-record with pytest suites/ -n auto --store-durations from an empty cache")


def test_the_header_names_the_shard_and_what_balanced_it(tmp_path):
    durations = tmp_path / ".test_durations"
    assert header((1, 4), durations, {}) == (f"rvv: shard 1/4: whole model x target cells, no {durations}: every "
                                             "test weighs the same")
    recorded = {"a::test[x]": 1.5, "b::test[y]": 2.0}
    assert header((3, 4), durations, recorded) == (f"rvv: shard 3/4: whole model x target cells, balanced by "
                                                   f"{durations} (2 tests recorded; an unrecorded test weighs "
                                                   "their mean)")
