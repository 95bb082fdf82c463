"""Bisect: releases through pip (pytest-rvv bisect) and commits (pytest-rvv bisect-run for git bisect run)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_rvv.base.errors import ConfigError
from pytest_rvv.comparison.bisect import BAD, GOOD, SKIP, ReleaseBisect, Step, failing_cells, versions_between
from pytest_rvv.config.settings import Settings, read_pyproject_table
from pytest_rvv.config.targets import BUILTIN_TARGETS
from pytest_rvv.measure.executed import measure_executed
from pytest_rvv.session import RvvSession
from pytest_rvv.toolchain.environments import toolchain_from_spec

from .conftest import SUITES, USER_TOOLS
from .test_toolchain_comparison import NO_VECTOR_WRAPPER, build_dir

RELEASES = ["3.13.0", "3.12.0", "3.11.0", "3.10.0", "3.9.0", "3.8.0"]


def bisect(first_bad: str | None, untestable: frozenset[str] = frozenset(), versions=None):
    versions = versions or versions_between(RELEASES, "3.8.0", "3.13.0")
    tested: list[str] = []

    def test(version: str) -> Step:
        tested.append(version)
        if version in untestable:
            return Step(version, SKIP, "cannot be installed", 0)
        bad = first_bad is not None and versions.index(version) >= versions.index(first_bad)
        line = f"IREE compiler version {version} @ {version.replace('.', '')}0abcd"
        return Step(version, BAD if bad else GOOD, line, 0)

    code, lines = ReleaseBisect(versions, test, lambda line: None).run()
    return code, lines, tested


def test_the_failing_cells_and_their_dispatches_are_read_from_pytests_output():
    output = """\
executed vectorization regression: convs on rv64gcv-zvl256b
  dispatch_1_conv_128x4x4x32x3x3_f32: executes 779364 -> 787524 instructions (+8160, +1.05%)
  dispatch_0_slow_memcpy: was vectorized (288 vector of 1040 instructions), now scalar (0 vector of 1775 instructions)
FAILED vectorization/test_executed_vectorization.py::test_still_vectorized_when_run[convs-rv64gcv-zvl256b] - Failed
FAILED correctness/test_agreement.py::test_matches_onnxruntime[mlp-rv64gc]
E   differs from the recorded snapshot (strict): dispatch_2_x: executes 10 -> 5 instructions (-5, -50.0%)
"""
    assert failing_cells(output) == (
        "convs-rv64gcv-zvl256b (test_still_vectorized_when_run)", "mlp-rv64gc (test_matches_onnxruntime)",
        "  dispatch_1_conv_128x4x4x32x3x3_f32: executes 779364 -> 787524 instructions (+8160, +1.05%)",
        "  dispatch_0_slow_memcpy: was vectorized (288 vector of 1040 instructions), now scalar (0 vector of 1775 "
        "instructions)", "  dispatch_2_x: executes 10 -> 5 instructions (-5, -50.0%)")


def test_the_first_bad_release_is_named_with_both_commits_in_few_steps():
    code, lines, tested = bisect("3.11.0")
    assert code == 0
    assert lines == ["first bad release: 3.11.0 (IREE compiler version 3.11.0 @ 31100abcd)",
                     "last good release: 3.10.0 (IREE compiler version 3.10.0 @ 31000abcd)",
                     "next, in IREE: git log 31000abcd..31100abcd"]
    assert len(tested) <= 4


def test_good_already_bad_and_bad_that_passes_are_said_plainly():
    code, lines, _ = bisect("3.8.0")
    assert code == 1 and lines[0].startswith("--good 3.8.0 is already bad")
    code, lines, _ = bisect(None)
    assert code == 1 and lines[0].startswith("--bad 3.13.0 is good")


def test_an_untestable_release_is_skipped_like_git_bisect_skip():
    code, lines, tested = bisect("3.11.0", untestable=frozenset({"3.10.0"}))
    assert "3.10.0" in tested and code == 1
    assert lines[0] == "the first bad release is one of 3.10.0, 3.11.0: 3.10.0 could not be tested"


def test_no_release_between_two_neighbours():
    code, lines, _ = bisect("3.13.0", versions=["3.12.0", "3.13.0"])
    assert code == 0 and lines[0] == "no release lies between 3.12.0 and 3.13.0: the first bad release is 3.13.0"


def test_a_range_in_the_wrong_order_or_an_unknown_release_is_one_line():
    with pytest.raises(ConfigError, match=r"^bisect range in the wrong order: --good 3.13.0 is not older than --bad "
                                          r"3.9.0$"):
        versions_between(RELEASES, "3.13.0", "3.9.0")
    with pytest.raises(ConfigError, match=r"^--bad 9.9.9: not a release of iree-base-compiler that pip can see"):
        versions_between(RELEASES, "3.9.0", "9.9.9")
    assert versions_between(RELEASES, "3.9.0", "3.11.0") == ["3.9.0", "3.10.0", "3.11.0"]


def executed_counts(version: str, model, target, workdir: Path) -> dict:
    """The executed snapshot of ``model`` compiled by release ``version`` and run under QEMU in the runtime that
    release's modules load in (library calls, not the bisect)."""
    toolchain = toolchain_from_spec(f"iree-base-compiler=={version}", USER_TOOLS)
    session = RvvSession(Settings.resolve(lambda option: None, {}, Path.cwd()), toolchain=toolchain)
    measured = measure_executed(session.cell(model, target, session.runner(target)), workdir)
    return measured.snapshot(model.name, target.name)


def test_bisect_over_real_releases_on_executed_counts_runs_each_step_in_its_own_runtime(project, tmp_path):
    """The selection: the executed counts of two small convs on rv64gcv-zvl256b, recorded with 3.11.0 and compared
    exactly. 3.11.0's modules load only in a runtime of its own commit, 3.12.0's and 3.13.0's only in a newer one:
    every step must run in its own (offline: built from PYTEST_RVV_IREE_SRC)."""
    from .test_runtime_choice import B48, E4A, release_runtime

    for commit in (B48, E4A):
        release_runtime(commit)
    target = BUILTIN_TARGETS["rv64gcv-zvl256b"]
    project.write(models=("convs",), suite=False)
    shutil.copytree(SUITES / "vectorization", project.path / "vectorization",
                    ignore=shutil.ignore_patterns("__pycache__", "__snapshots__"))
    table = read_pyproject_table(project.path / "pyproject.toml")
    model = Settings.resolve(lambda option: None, table, project.path).known_models["convs"]
    counts = {v: executed_counts(v, model, target, tmp_path / v) for v in ("3.11.0", "3.12.0", "3.13.0")}
    changed = [v for v in ("3.12.0", "3.13.0") if counts[v] != counts["3.11.0"]]
    assert changed, "3.11.0 .. 3.13.0 execute the convs identically: pick another selection"
    selection = ["vectorization/test_executed_vectorization.py", "--rvv-models=convs",
                 f"--rvv-targets={target.name}", "--rvv-strict-baselines", "-p", "no:cacheprovider"]
    env311 = toolchain_from_spec("iree-base-compiler==3.11.0", USER_TOOLS).iree_import_onnx.parent
    record = subprocess.run([sys.executable, "-m", "pytest", *selection, "--snapshot-update"], cwd=project.path,
                            env={**os.environ, "PYTEST_RVV_IREE_BUILD": str(env311)}, capture_output=True, text=True)
    assert record.returncode == 0, record.stdout[-2000:]
    run = subprocess.run([sys.executable, "-m", "pytest_rvv.cli", "bisect", "--good", "3.11.0", "--bad", "3.13.0",
                          "--", *selection], cwd=project.path, capture_output=True, text=True)
    assert f"[bisect] first bad release: {changed[0]} (IREE compiler version {changed[0]}" in run.stdout, run.stdout
    assert "[bisect] next, in IREE: git log " in run.stdout
    # the last lines name what made it bad: the failing cell, then its dispatches with both counts
    tail = run.stdout[run.stdout.index("[bisect] what fails with"):]
    assert f"convs-{target.name} (test_still_vectorized_when_run)" in tail, tail
    assert re.search(r"dispatch_\S+: executes \d+ -> \d+ instructions", tail), tail
    assert run.returncode == 0


def test_bisect_run_exit_codes_for_git_bisect_run(project, tmp_path):
    project.write(suite=False)
    shutil.copytree(SUITES / "vectorization", project.path / "vectorization",
                    ignore=shutil.ignore_patterns("__pycache__", "__snapshots__"))
    selection = ["vectorization/test_static_vectorization.py", "--rvv-models=mlp", "--rvv-targets=rv64gcv-zvl256b",
                 "--rvv-strict-baselines", "-p", "no:cacheprovider"]
    wheel, scalar = build_dir(tmp_path / "wheel"), build_dir(tmp_path / "no-vector", NO_VECTOR_WRAPPER)

    def step(build: Path, *extra: str) -> int:
        return subprocess.run([sys.executable, "-m", "pytest_rvv.cli", "bisect-run", f"--build={build}", *extra,
                               "--", *selection], cwd=project.path, capture_output=True, text=True).returncode

    subprocess.run([sys.executable, "-m", "pytest", *selection, "--snapshot-update"], cwd=project.path, check=True,
                   env={**os.environ, "PYTEST_RVV_IREE_BUILD": str(wheel)}, capture_output=True)
    assert step(wheel) == 0  # the recorded code: good
    assert step(scalar) == 1  # +v dropped: the snapshot's vectorized dispatches are scalar now: bad
    assert step(tmp_path / "empty") == 125  # nothing built here: cannot test
    assert step(wheel, "--build-cmd=exit 3") == 125  # the build failed: cannot test
